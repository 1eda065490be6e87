"""Annotation traces: recording them during a run, storing and reading them.

- :mod:`cpasim.tracing.records` — the record format (op codes, ``RECORD_DTYPE``, ``TraceKey``,
  ``TraceSource``);
- :mod:`cpasim.tracing.tracer` — :class:`Tracer`, :data:`NULL_TRACER`, state-machine handles;
- :mod:`cpasim.tracing.primitives` — SimPy queues that annotate themselves;
- :mod:`cpasim.tracing.columnar` — the compact chunked ``.cpt`` file;
- :mod:`cpasim.tracing.jsonl` — JSON Lines, the interchange form.
"""

from __future__ import annotations

from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.inputs import open_input, read_error
from cpasim.tracing.records import TraceKey, TraceSource
from cpasim.tracing.tracer import NULL_SM, NULL_TRACER, SM, MemorySink, NullTracer, Tracer

#: Names imported on first use: the self-annotating queues need SimPy, which a reader
#: of traces (analyze, predict from a trace) never does.
_PRIMITIVES = ("TracedContainer", "TracedPool", "TracedStore")


def __getattr__(name: str):
    if name in _PRIMITIVES:
        from cpasim.tracing import primitives

        return getattr(primitives, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "NULL_SM",
    "NULL_TRACER",
    "SM",
    "MemorySink",
    "NullTracer",
    "TraceKey",
    "TraceSource",
    "TracedContainer",
    "TracedPool",
    "TracedStore",
    "Tracer",
    "open_trace",
    "trace_digest",
    "write_trace",
]

#: File extensions :func:`write_trace` knows.
TRACE_SUFFIXES = (".cpt", ".jsonl")


def open_trace(path: str | Path) -> TraceSource:
    """Open a trace file of either format, told apart by its first bytes (a file
    named ``.cpt`` must be one; an empty file is no trace of either)."""
    from cpasim.tracing.columnar import MAGIC, read_cpt

    path = Path(path)
    with open_input(path, "trace") as fh:
        try:
            head = fh.read(len(MAGIC))
        except OSError as exc:
            raise read_error(path, exc, "trace") from None
    if not head:
        raise CpasimError(f"{path}: not a trace file (it is empty: 0 bytes)")
    if head == MAGIC or path.suffix.lower() == ".cpt":
        return read_cpt(path)  # a .cpt without its header is refused there
    from cpasim.tracing.jsonl import read_jsonl

    return read_jsonl(path)


def trace_digest(path: str | Path) -> str:
    """What identifies the content of a trace file, cheaply: for a ``.cpt`` file a
    digest of its block frames (each carries its block's checksum), for JSON
    Lines a digest of the bytes.  A run's sidecar records it
    (:mod:`cpasim.predict.runs`), so a sidecar never vouches for another trace."""
    import hashlib

    from cpasim.tracing.columnar import MAGIC, frame_digest

    path = Path(path)
    with open_input(path, "trace") as fh:
        try:
            if fh.read(len(MAGIC)) == MAGIC:
                return "cpt:" + frame_digest(path)
            fh.seek(0)
            return "sha256:" + hashlib.file_digest(fh, "sha256").hexdigest()
        except OSError as exc:
            raise read_error(path, exc, "trace") from None


def write_trace(source: TraceSource, path: str | Path, *, partial: bool = False) -> Path:
    """Write ``source`` to ``path`` in the format its extension names (.cpt or .jsonl).

    The file appears only once complete; an error leaves what ``path`` held
    untouched.  ``partial``: keep the file under a partial name of its own
    (``X.partial.cpt``) instead of replacing ``path``.  Returns where it is.
    """
    return write_trace_digested(source, path, partial=partial)[0]


def write_trace_digested(
    source: TraceSource, path: str | Path, *, partial: bool = False
) -> tuple[Path, str]:
    """:func:`write_trace`, and the :func:`trace_digest` of the file as this process
    wrote it (hashed while writing): what a sidecar written beside it must carry."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".cpt":
        from cpasim.tracing.columnar import _write_cpt

        writer = _write_cpt(source, path, partial)
        return writer.written, writer.digest
    if suffix == ".jsonl":
        from cpasim.tracing.jsonl import write_jsonl_digested

        return write_jsonl_digested(source, path, partial=partial)
    raise CpasimError(
        f"{path}: unknown trace format {suffix or '(no extension)'!r}; "
        f"expected one of {', '.join(TRACE_SUFFIXES)}"
    )
