"""The ``cpasim`` command line.

Each sub-command lives in its own module below this package and registers
itself on :data:`app` (:mod:`cpasim.cli.root`); this module only assembles the
ones a command line needs (:mod:`cpasim.cli.commands`) and turns
:class:`~cpasim.errors.CpasimError` into one line on stderr and exit status 2.
It imports nothing heavy itself: :func:`main` takes charge of Ctrl-C and
SIGTERM (:mod:`cpasim.interrupts`) before the commands, and the libraries they
need, are imported — an interrupt during those imports is one line too.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
import threading

from cpasim import cli_process, interrupts
from cpasim.errors import CpasimError, one_line


def __getattr__(name: str):
    if name == "app":  # the Typer application, imported when first asked for
        from cpasim.cli.root import app

        globals()["app"] = app
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register(args: list[str] | None = None) -> None:
    """Add to ``app`` the commands the command line ``args`` needs (None: every
    command), importing only their modules (:mod:`cpasim.cli.commands`)."""
    from cpasim.cli import commands
    from cpasim.cli.root import app, plain_help

    commands.register(args)
    plain_help(app)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``argv`` None: the process's own arguments).

    Every error a person can cause — a bad scenario, trace or option — ends in
    one ``cpasim: error: ...`` line on stderr and a non-zero exit (2 for bad
    input), never a traceback.  Ctrl-C, SIGTERM and SIGHUP end a command with
    one line and status 128 + the signal (130, 143, 129), at any moment from here
    on, imports included.
    """
    program = argv is None
    if program:
        # A name from a file or a file name of undecodable bytes that reaches
        # stdout unescaped is written escaped, never a UnicodeEncodeError.
        _reconfigure(sys.stdout)
        # The process is the command's: numba compiles nothing in it but the kernel,
        # and nothing in it does linear algebra that a pool of threads would speed up.
        cli_process.skip_in_this_process()
        _one_blas_thread()
    _settle_run_folders(0)  # folders made before this command are not its own
    try:
        with interrupts.handled():
            code = _run(argv)
            _settle_run_folders(code)
    finally:
        if program:  # what is left is the interpreter's shutdown
            interrupts.exit_at_once()
            _leave_objects_to_the_system()
    raise SystemExit(code)


def console() -> None:
    """The ``cpasim`` console script, and ``python -m cpasim``: :func:`main` as the
    process's own command, after which the process ends without tearing its modules
    down (:func:`_end_process`).  A program that calls :func:`main` keeps its process."""
    try:
        main()
    except SystemExit as end:
        _end_process(end.code)
        raise


def _end_process(code) -> None:
    """End the process with status ``code`` now that its command is over, skipping
    the interpreter's teardown of every module (30 ms after a prediction that loaded
    numba; what :func:`_leave_objects_to_the_system` leaves of it).

    What an exit owes is paid first: the exit handlers run (the temporary cache of
    :mod:`cpasim.analysis.numba_cache`, temporary directories' finalizers, logging's
    flush), then the standard streams are flushed.  The command's outputs are in
    place already (:mod:`cpasim.files` closes and renames each before the command
    returns).  Left to Python's own exit, which does the same and more: a status
    that is not a number, another thread still running (Python waits for it), a
    stream that cannot be flushed (Python reports it, with status 120).
    """
    if not isinstance(code, int) or threading.active_count() > 1:
        return
    atexit._run_exitfuncs()  # and forgets them: an exit after this runs none twice
    streams = (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__)
    try:
        for stream in dict.fromkeys(s for s in streams if s is not None):
            stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


def _leave_objects_to_the_system() -> None:
    """Keep the interpreter's shutdown from walking every object again and again.

    As it tears the modules down, Python collects cycles several times over
    everything still alive: after a command that loaded numba and the analyzer
    (125,000 objects) that took longer than the prediction itself (0.3-0.5 s).
    Frozen (``gc.freeze``), what lives now is out of those collections; it is
    still freed as Python drops the modules, exit handlers still run, and the
    system takes back the rest, as at any exit.
    """
    gc.freeze()


#: The variables OpenBLAS (numpy's and scipy's BLAS) reads its number of threads from.
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def _one_blas_thread() -> None:
    """One BLAS thread in the command's process and the processes it starts, unless
    the user chose a number.  OpenBLAS starts a pool of threads, one per core, as
    numpy loads: about 50 ms of every command's start-up on two cores, for no
    command's work (the only linear algebra is a calibration's least-squares fit
    of a few parameters, far below the sizes OpenBLAS splits between threads), and
    a sweep's workers would each start a pool."""
    if not any(name in os.environ for name in BLAS_THREADS):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def _settle_run_folders(code: int) -> None:
    """A failed command leaves no empty run folder (--out) behind."""
    runfolder = sys.modules.get("cpasim.runfolder")
    if runfolder is None:
        return
    if code:
        runfolder.remove_unused()
    else:
        runfolder.forget_created()


def _run(argv: list[str] | None) -> int:
    """The command's exit status."""
    try:
        program = argv is None  # main(args), called by a program, leaves its collector be
        with cli_process.uncollected() if program else contextlib.nullcontext():
            _register(sys.argv[1:] if program else argv)
        from cpasim.cli.root import app

        code = app(args=argv, standalone_mode=False)
    except CpasimError as exc:
        return _fail(str(exc), 2)
    except KeyboardInterrupt:
        # Ctrl-C or SIGTERM outside a command (while importing, parsing) or a second
        # one while a command cleans up: outputs already keep what they held
        # (cpasim.files), so one line is all there is to say.
        return _interrupted()
    except Exception as exc:
        from typer import Abort

        if isinstance(exc, Abort):  # end of input where a command asked for more
            return _fail("aborted", 130)
        # Usage errors (unknown option, missing argument, bad value) are click
        # exceptions; typer may vendor click, so recognise them by interface.
        if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
            raise
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        return _fail(exc.format_message() + hint, exc.exit_code)
    code = code if isinstance(code, int) else 0
    if code == 130 or interrupts.received() is not None:
        # Typer ends a command that Ctrl-C (or SIGTERM, raised as Ctrl-C) stopped
        # with status 130, silently unless the command said what it kept.
        return _interrupted()
    return code


def _interrupted() -> int:
    if not interrupts.reported():
        print("cpasim: interrupted", file=sys.stderr)
    return interrupts.exit_status()


def _fail(message: str, status: int) -> int:
    print(f"cpasim: error: {one_line(message)}", file=sys.stderr)
    return status


def _reconfigure(stream) -> None:
    with contextlib.suppress(AttributeError, ValueError):  # not a text stream of ours
        stream.reconfigure(errors="backslashreplace")
