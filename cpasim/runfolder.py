"""Run folders: one directory holding what a run was and what it gave.

As gem5's ``m5out/`` (``config.ini`` + ``stats.txt``): ``config.toml`` is the
fully resolved scenario (``cpasim run DIR/config.toml`` simulates the same
configuration, so it reproduces ``result.json`` except its wall-time field),
``result.json`` is what ``--json`` prints, ``report.html`` is the page a person
opens (:mod:`cpasim.runreport`), and the artefacts a run was asked for (trace,
series, capture, ...) go beside them under default names.

:func:`artefact_path` is the one place that says where an artefact goes; every
writer that accepts a run folder asks it.  Every file is written atomically
(:mod:`cpasim.files`).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from cpasim.errors import CpasimError
from cpasim.files import write_text_atomically

CONFIG = "config.toml"
RESULT = "result.json"
#: Default names of the artefacts a run writes into its folder when asked.
TRACE = "trace.cpt"
SERIES = "series.csv"
CAPTURE = "capture.pcap"


#: The folders :func:`prepare` created (outermost first) that a failure may take back.
_created: list[Path] = []


def prepare(out_dir: str | Path, overwrite: bool = False) -> Path:
    """Create ``out_dir`` (and its parents); refuse one that holds anything unless
    ``overwrite`` (then the files a run writes are replaced, others left alone).
    A command that then fails takes the folders back (:func:`remove_unused`)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise CpasimError(f"{out}: --out expects a directory, this is a file")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise CpasimError(f"{out}: run folder is not empty (give --overwrite to write over it)")
    missing = [d for d in (out, *out.parents) if not d.exists()][::-1]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CpasimError(f"{out}: cannot create run folder: {exc.strerror}") from None
    _created.extend(missing)
    return out


def remove_unused() -> None:
    """After a failed command: remove the folders :func:`prepare` created that are
    still empty (a full disk before the first file, an error, Ctrl-C), innermost
    first; a folder that holds anything stays.  Forgets them either way."""
    for folder in reversed(_created):
        with contextlib.suppress(OSError):  # not empty, or gone: left as it is
            folder.rmdir()
    _created.clear()


def forget_created() -> None:
    """The folders made so far are kept whatever happens next (a command succeeded)."""
    _created.clear()


def artefact_path(out_dir: str | Path | None, name: str, given: str | Path | None = None):
    """Where the artefact ``name`` (e.g. ``"capture.pcap"``) of a run goes.

    An explicit path ``given`` by the user wins: a bare file name is put inside
    the run folder, a path with a directory is kept as it is.  Without a run
    folder it is ``given`` (None: the artefact was not asked for)."""
    if out_dir is None:
        return None if given is None else Path(given)
    if given is None:
        return Path(out_dir) / name
    given = Path(given)
    return Path(out_dir) / given if given.parent == Path(".") else given


def write_config(out_dir: str | Path, cfg, name: str = CONFIG) -> Path:
    """The fully resolved scenario, as ``cpasim params --toml`` writes it."""
    path = artefact_path(out_dir, name)
    write_text_atomically(path, cfg.to_toml())
    return path


def write_result(out_dir: str | Path, result: dict, name: str = RESULT) -> Path:
    """The result as ``--json`` prints it (sorted keys, one object)."""
    path = artefact_path(out_dir, name)
    write_text_atomically(path, json.dumps(result, sort_keys=True, indent=1) + "\n")
    return path


def write_report(
    out_dir: str | Path,
    cfg,
    result: dict,
    *,
    series: Path | None = None,
    analysis=None,
    trace=None,
    images=(),
) -> Path:
    """``report.html``: the verdict, the figures, the pictures and the configuration
    on one page (:func:`cpasim.runreport.write_report`)."""
    from cpasim.progress import note
    from cpasim.runreport import write_report as write

    with note("writing report.html"):
        return write(
            out_dir,
            result=result,
            config_text=cfg.to_toml(),
            series=series,
            analysis=analysis,
            trace=trace,
            images=images,
        )
