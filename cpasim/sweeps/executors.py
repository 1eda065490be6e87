"""Where the points run: in this process, in local worker processes, or on Dask.

Every executor is a generator ``run(fn, items)`` that yields ``(position,
value)`` pairs in *completion* order, where ``value = fn(items[position])``.
``fn`` must be a picklable top-level callable that does not raise for a
failing point (see :func:`cpasim.sweeps.evaluate.guarded`); an error of the
executor itself (a worker process that died, a lost Dask worker) is yielded
as an :class:`ExecutorFailure` value instead, so one bad point never stops a
sweep.  When the consumer stops early (Ctrl-C, an exception, or closing the
generator) the ``finally`` blocks cancel what is pending and shut the workers
down.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass

from cpasim.errors import CpasimError

DASK_INSTALL_HINT = "install it with: pip install 'cpasim[dask]'"


@dataclass(frozen=True)
class ExecutorFailure:
    """A point lost to the machinery rather than to the model."""

    message: str


def cores() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def run_inline(fn: Callable, items: Sequence) -> Iterator[tuple[int, object]]:
    """Run every item in this process, in order (``--workers 1``)."""
    for position, item in enumerate(items):
        yield position, fn(item)


def start_method() -> str:
    """forkserver where the platform has it, else spawn.

    Workers start from a clean single-threaded process, never a fork of this one
    with its progress-bar thread (or a Jupyter kernel's threads).
    """
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


@contextlib.contextmanager
def _main_left_alone() -> Iterator[None]:
    """Start worker processes without them running the caller's ``__main__``.

    A spawned or forkserver child re-runs the parent's main script (by path or
    module name) before its first task, so that functions defined there can be
    unpickled.  The tasks here are cpasim's own top-level functions and need
    none of it; re-running it would run a user's unguarded top-level
    ``cpasim.sweep(...)`` again in every worker (printing its output once per
    process and failing the pool), and ``python -`` has no file to re-run.
    multiprocessing reads ``sys.modules["__main__"]`` when it starts a process;
    while the workers start, it finds a module with neither a file nor a spec,
    which it leaves alone.
    """
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is None:
            del sys.modules["__main__"]
        else:
            sys.modules["__main__"] = main


#: Seconds between a worker's checks that the sweep's process is still there.
PARENT_POLL_S = 1.0


def watch_parent(parent: int) -> None:
    """Worker initializer: end this worker once the sweep's process ``parent`` is gone.

    A sweep ended by ``kill -9`` (or the out-of-memory killer) cannot shut its
    pool down; its workers, children of the forkserver rather than of the
    sweep, would wait for work forever.  The forkserver and the resource
    tracker end by themselves once the processes holding their pipes are gone.
    """

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            try:
                os.kill(parent, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # exists (the check only needs it to exist)
                pass

    threading.Thread(target=watch, name="cpasim-parent-watch", daemon=True).start()


def run_processes(fn: Callable, items: Sequence, workers: int) -> Iterator[tuple[int, object]]:
    """Run the items on a pool of local worker processes.

    ``fn`` must be importable from cpasim (not defined in ``__main__``): the
    workers never import the caller's main module.
    """
    pending: dict[Future, int] = {}
    pool = None
    try:
        context = multiprocessing.get_context(start_method())
        pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=context,
            initializer=watch_parent,
            initargs=(os.getpid(),),
        )
        # The pool starts its workers as tasks are submitted (the forkserver too).
        with _main_left_alone():
            pending = {pool.submit(fn, item): position for position, item in enumerate(items)}
    except (OSError, NotImplementedError, ImportError) as exc:
        # No semaphores or no /dev/shm (some containers and sandboxes): one process.
        print(
            f"cpasim: worker processes unavailable ({exc}); running in this process",
            file=sys.stderr,
        )
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        yield from run_inline(fn, items)
        return
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                position = pending.pop(future)
                yield position, _value(future)
    finally:
        if not pending:
            pool.shutdown()
        elif _stop_workers(pool):
            pool.shutdown(wait=True)  # the pool fails what was left; nothing runs on
        else:
            pool.shutdown(wait=False, cancel_futures=True)


def _value(future) -> object:
    try:
        return future.result()
    except Exception as exc:  # the worker died or the task could not be sent
        return ExecutorFailure(f"{type(exc).__name__}: {exc}")


def _stop_workers(pool: ProcessPoolExecutor) -> bool:
    """End the pool's worker processes at once; False if this Python cannot.

    After Ctrl-C the user wants the machine back, not the running points to
    finish.  Cancelling futures as well would race the pool's own clean-up.
    """
    if hasattr(pool, "terminate_workers"):  # Python >= 3.14
        pool.terminate_workers()
        return True
    processes = getattr(pool, "_processes", None)
    if processes is None:
        return False
    for process in list(processes.values()):
        if process.is_alive():
            process.terminate()
    return True


def import_distributed():
    """The ``distributed`` module, or a clear error saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise CpasimError(f"--dask needs the optional Dask support; {DASK_INSTALL_HINT}") from None
    return distributed


@contextlib.contextmanager
def _sigint_ignored():
    """Start child processes with Ctrl-C ignored (they inherit it): the sweep
    shuts them down itself, without each printing a KeyboardInterrupt."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_dask(
    fn: Callable, items: Sequence, address: str, workers: int | None = None
) -> Iterator[tuple[int, object]]:
    """Run the items on a Dask cluster: ``"local"`` starts a LocalCluster here."""
    distributed = import_distributed()
    import dask.config as dask_config

    cluster = None
    client = None
    futures: dict = {}
    finished = False
    try:
        try:
            if address == "local":
                # Dask starts its workers (spawned) before LocalCluster returns.  Its
                # scheduler and workers listen for HTTP whatever the dashboard
                # setting: with no routes they serve nothing (no dashboard, status
                # pages or metrics nobody asked for).
                quiet_http = {
                    "distributed.scheduler.http.routes": [],
                    "distributed.worker.http.routes": [],
                }
                with _sigint_ignored(), _main_left_alone(), dask_config.set(quiet_http):
                    cluster = distributed.LocalCluster(
                        n_workers=workers or cores(),
                        threads_per_worker=1,
                        processes=True,
                        dashboard_address=None,
                        silence_logs=logging.ERROR,
                    )
                client = distributed.Client(cluster)
            else:
                client = distributed.Client(address, timeout="10s")
        except ValueError as exc:
            raise CpasimError(
                f"--dask {address}: expected tcp://HOST:PORT or 'local' ({exc})"
            ) from None
        except OSError as exc:
            raise CpasimError(f"--dask {address}: cannot reach the scheduler ({exc})") from None
        futures = {
            client.submit(fn, item, pure=False): position for position, item in enumerate(items)
        }
        for future in distributed.as_completed(list(futures)):
            yield futures[future], _value(future)
        finished = True
    finally:
        if client is not None:
            if not finished and futures:
                client.cancel(list(futures))
            client.close()
        if cluster is not None:
            cluster.close()
