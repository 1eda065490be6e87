"""cpasim: a discrete-event what-if simulator of the network stack.

Two hosts and the link between them are SimPy processes that emit annotations;
the analyzer turns those into the end-to-end critical path, names the
bottleneck, and predicts what a parameter change would buy.

    import cpasim
    r = cpasim.run("scenarios/tcp-stream.toml", trace=True, **{"link.rate": "10Gbps"})
    a = cpasim.analyze(r)                    # critical path, bottleneck, loops
    v = cpasim.explain("scenarios/tcp-stream.toml")  # what limits it, what to change
    p = cpasim.predict("scenarios/tcp-stream.toml", change={"tcp.wmem": "1MiB"})
    t = cpasim.sweep("scenarios/tcp-stream.toml", grid={"link.rate": ["1Gbps", "10Gbps"]})

Every name below is imported on first use, so ``import cpasim`` stays quick;
``docs/api.md`` shows each with an example.
"""

import importlib as _importlib
import sys as _sys
import types as _types

__version__ = "0.1.0"

#: Public name -> the module that defines it (loaded on first use).
_LAZY = {
    # running, analysing, predicting (cpasim.api)
    "load": "cpasim.api",
    "run": "cpasim.api",
    "analyze": "cpasim.api",
    "explain": "cpasim.api",
    "transforms": "cpasim.api",
    "predict": "cpasim.api",
    "validate": "cpasim.api",
    "calibrate": "cpasim.api",
    "inspect_capture": "cpasim.api",
    "sweep": "cpasim.sweeps",
    # building models of your own from traced SimPy primitives
    "Tracer": "cpasim.tracing",
    "TracedStore": "cpasim.tracing",
    "TracedContainer": "cpasim.tracing",
    "TracedPool": "cpasim.tracing",
    "open_trace": "cpasim.tracing",
    # result and configuration types
    "Config": "cpasim.config",
    "Result": "cpasim.simulate",
    "AnalysisResult": "cpasim.analysis",
    "Verdict": "cpasim.verdict",
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


class _Package(_types.ModuleType):
    """``cpasim`` itself: the functions ``predict`` and ``calibrate`` share their names
    with the subpackages that implement them.  Importing a subpackage sets the
    attribute of that name on its parent, which would replace the function for
    every later ``cpasim.predict(...)``; the function is kept instead.  The
    subpackages stay importable as ever (``from cpasim.predict.runs import ...``).
    """

    def __setattr__(self, name: str, value) -> None:
        if name in _SHADOWED and isinstance(value, _types.ModuleType):
            return
        super().__setattr__(name, value)


#: Public functions named like a subpackage of cpasim.
_SHADOWED = frozenset({"predict", "calibrate"})
_sys.modules[__name__].__class__ = _Package
