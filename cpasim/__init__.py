"""cpasim: a discrete-event what-if simulator of the network stack.

Two hosts and the link between them are SimPy processes that emit annotations;
the analyzer turns those into the end-to-end critical path, names the
bottleneck, and predicts what a parameter change would buy.

    import cpasim
    r = cpasim.run("scenarios/tcp-stream.toml", trace=True, **{"link.rate": "10Gbps"})
    a = cpasim.analyze(r)                    # critical path, bottleneck, loops
    p = cpasim.predict("scenarios/tcp-stream.toml", change={"tcp.wmem": "1MiB"})
    t = cpasim.sweep("scenarios/tcp-stream.toml", grid={"link.rate": ["1Gbps", "10Gbps"]})

Every name below is imported on first use, so ``import cpasim`` stays quick;
``docs/api.md`` shows each with an example.
"""

import importlib as _importlib

__version__ = "0.1.0"

#: Public name -> the module that defines it (loaded on first use).
_LAZY = {
    # running, analysing, predicting (cpasim.api)
    "load": "cpasim.api",
    "run": "cpasim.api",
    "analyze": "cpasim.api",
    "transforms": "cpasim.api",
    "predict": "cpasim.api",
    "validate": "cpasim.api",
    "calibrate": "cpasim.api",
    "inspect_capture": "cpasim.api",
    "sweep": "cpasim.sweeps",
    # building models of your own from traced SimPy primitives
    "Tracer": "cpasim.trace",
    "TracedStore": "cpasim.trace",
    "TracedContainer": "cpasim.trace",
    "TracedPool": "cpasim.trace",
    "open_trace": "cpasim.trace",
    # result and configuration types
    "Config": "cpasim.config",
    "Result": "cpasim.simulate",
    "AnalysisResult": "cpasim.analysis",
    "SweepResult": "cpasim.sweeps",
    "CpasimError": "cpasim.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'cpasim' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*__all__, *(n for n in globals() if n.startswith("__"))})
