"""cpasim: a discrete-event what-if simulator of the network stack.

Two hosts and the link between them are SimPy processes that emit annotations;
the analyzer turns those into the end-to-end critical path, names the
bottleneck, and predicts what a parameter change would buy.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # The sweep machinery pulls in rich and concurrent.futures; load it on first use.
    if name == "sweep":
        from cpasim.sweeps import sweep

        return sweep
    raise AttributeError(f"module 'cpasim' has no attribute {name!r}")
