"""cpasim: a discrete-event what-if simulator of the network stack.

Two hosts and the link between them are SimPy processes that emit annotations;
the analyzer turns those into the end-to-end critical path, names the
bottleneck, and predicts what a parameter change would buy.
"""

__version__ = "0.1.0"
