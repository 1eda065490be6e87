"""What-if predictions from a trace, checked by re-simulation (Saidi ch. 5.5, 6).

- :mod:`~cpasim.predict.transforms_table` — parameter change → analyzer transforms;
- :mod:`~cpasim.predict.runs` — a traced, analysed run and its sidecar;
- :mod:`~cpasim.predict.whatif` — predict a change from a run's trace;
- :mod:`~cpasim.predict.validation` — predict, then re-simulate and compare;
- :mod:`~cpasim.predict.remedies` — bottleneck → the change that removes it;
- :mod:`~cpasim.predict.ladder` — Saidi's figure 6.2: a sequence of remedies,
  each predicted from every earlier run and re-simulated.
"""
