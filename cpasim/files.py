"""Output files: written whole under a fresh temporary name, then renamed into place.

Every file cpasim writes (traces, sidecars, sweep tables, TOML, pictures,
captures, series, run folders) goes through this module, which promises:

- the temporary file is created beside the target (so the rename is atomic),
  under a unique name, with ``O_CREAT | O_EXCL | O_NOFOLLOW`` (``mkstemp``): a
  name planted in advance, or a symbolic link, is never written through;
- the target is replaced only once the new content is complete; an error or an
  interrupt leaves what the path held untouched and removes the temporary file,
  except where the caller keeps it as a *partial* file under a name of its own
  (:meth:`OutputFile.keep_partial`, e.g. the trace of an interrupted run);
- a failure to write (a full disk, a read-only directory) is one
  :class:`~cpasim.errors.CpasimError` naming the file, never a traceback.

The temporary file is private (``mkstemp``), so before the rename it gets the
mode a plain ``open(path, "w")`` would have given it: 0666 less the user's umask.

A *stream* is written in place, never replaced: a path that names (through
symbolic links too) a character device or a FIFO — ``--pcap /dev/null``, a named
pipe another tool reads, ``/dev/stdout`` — is opened for writing as ``cp`` or a
shell's ``>`` would, and the output goes to it as it is made; no temporary file
is created beside it, nothing is renamed, its mode is left alone.  What a failed
or interrupted command already wrote to a stream is gone to its reader (there is
no old content to keep).  A block device or a socket is refused.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from cpasim.errors import CpasimError

#: The suffix of temporary files (the name before it is random).
TEMP_SUFFIX = ".part"


def umask_mode() -> int:
    """0666 less the process's umask (reading the umask means setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def write_error(path: str | Path, exc: OSError, what: str = "") -> CpasimError:
    """The one-line error for an ``OSError`` met writing ``path`` (the ``what``)."""
    reason = exc.strerror or str(exc)
    return CpasimError(f"{path}: cannot write{' ' + what if what else ''}: {reason}")


def is_stream(path: str | Path) -> bool:
    """Whether ``path`` is written in place rather than replaced: it names (through
    symbolic links too) a character device or a FIFO."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing (a file to be made), or no name at all
        return False
    return stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)


def check_target(path: str | Path, what: str = "output file") -> Path:
    """Refuse a target that cannot be a file: a directory, one in a missing directory,
    a block device or a socket."""
    path = Path(path)
    if path.is_dir():
        raise CpasimError(f"{path}: cannot write {what}: it is a directory")
    with contextlib.suppress(OSError, ValueError):
        mode = os.stat(path).st_mode
        if stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
            kind = "a block device" if stat.S_ISBLK(mode) else "a socket"
            raise CpasimError(
                f"{path}: cannot write {what}: it is {kind} (outputs go to regular files, "
                "character devices and FIFOs)"
            )
    parent = path.parent
    if not parent.is_dir():
        raise CpasimError(f"{path}: cannot write {what}: the directory {parent} does not exist")
    return path


class OutputFile:
    """One output file being written: a fresh temporary file beside ``path``.

    Write to :attr:`tmp` (or the file :meth:`open` gives), then :meth:`commit` to
    rename it into place, :meth:`discard` to drop it, or :meth:`keep_partial` to
    keep it under a name of its own.  Creating one checks at once that ``path``
    can be written, so a command can refuse an unwritable output before it starts
    work.

    When ``path`` is a stream (:func:`is_stream`), :attr:`tmp` is ``path`` itself,
    opened only when first written (opening a FIFO waits for its reader), and
    committing, discarding or keeping a partial file just closes it.
    """

    def __init__(self, path: str | Path, what: str = "output file"):
        self.path = check_target(path, what)
        self.what = what
        self.done = False
        self.stream = is_stream(self.path)
        if self.stream:
            self.fd = None
            self.tmp = self.path
            if not os.access(self.path, os.W_OK):
                raise write_error(self.path, PermissionError(13, os.strerror(13)), what)
            return
        try:
            self.fd, tmp = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=TEMP_SUFFIX, dir=self.path.parent
            )
        except OSError as exc:
            raise write_error(self.path, exc, what) from None
        self.tmp = Path(tmp)

    def open(self, mode: str = "wb", **kwargs):
        """The file being written as a Python file object (owns :attr:`fd` from then on)."""
        if self.stream and self.fd is None:
            self.fd = self._open_stream()
        fd, self.fd = self.fd, None
        return os.fdopen(fd, mode, **kwargs)

    def _open_stream(self) -> int:
        """``path`` opened for writing in place, checked to be the stream it was."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            raise write_error(self.path, exc, self.what) from None
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
            os.close(fd)  # replaced by a file since it was looked at: write nothing into it
            raise CpasimError(
                f"{self.path}: cannot write {self.what}: it changed from a device or FIFO "
                "into a file while cpasim was starting"
            )
        return fd

    def _close_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def commit(self) -> Path:
        """Rename the finished temporary file to ``path`` (a stream: nothing to do)."""
        self._close_fd()
        if self.stream:
            self.done = True
            return self.path
        try:
            os.chmod(self.tmp, umask_mode())
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.discard()
            raise write_error(self.path, exc, self.what) from None
        self.done = True
        return self.path

    def discard(self) -> None:
        """Remove the temporary file; ``path`` keeps what it held (a stream: what was
        written to it is gone to its reader)."""
        self._close_fd()
        if not self.stream:
            self.tmp.unlink(missing_ok=True)
        self.done = True

    def keep_partial(self) -> Path:
        """Keep the temporary file as ``<stem>.partial<suffix>`` (numbered if that name
        is taken; an existing file is never replaced); returns where it is (a stream:
        ``path``, which received it)."""
        self._close_fd()
        if self.stream:
            self.done = True
            return self.path
        os.chmod(self.tmp, umask_mode())
        stem, suffix = self.path.stem, self.path.suffix
        for n in range(1, 1000):
            name = f"{stem}.partial{suffix}" if n == 1 else f"{stem}.partial-{n}{suffix}"
            kept = self.path.with_name(name)
            try:
                os.link(self.tmp, kept)  # fails if the name exists: nothing is replaced
            except FileExistsError:
                continue
            except OSError:  # no hard links here: keep the temporary name
                kept = self.tmp
                break
            self.tmp.unlink()
            break
        else:
            kept = self.tmp
        self.done = True
        return kept

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if self.done:
            return
        if kind is None:
            self.commit()
        else:
            self.discard()
            if isinstance(exc, OSError):
                raise write_error(self.path, exc, self.what) from None


def replace_atomically(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` the whole file, give it the umask's mode, rename it to ``path``.

    Anything ``write`` raises leaves ``path`` as it was and removes the temporary
    file; an ``OSError`` (a full disk) becomes a :class:`CpasimError` naming ``path``.
    A stream gets the file once it is whole (``write`` may seek, as image and
    parquet writers do, which a FIFO cannot): a failure sends its reader nothing.
    """
    with OutputFile(path) as out:
        out._close_fd()
        if not out.stream:
            write(out.tmp)
            return out.path
        with tempfile.TemporaryDirectory(prefix="cpasim-") as folder:
            whole = Path(folder) / out.path.name  # the same suffix: writers go by it
            write(whole)
            with whole.open("rb") as src, out.open("wb") as dst:
                shutil.copyfileobj(src, dst)
    return out.path


def write_text_atomically(path: str | Path, text: str) -> Path:
    return replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def check_writable(path: str | Path, what: str = "output file") -> Path:
    """Fail now, with one line, if ``path`` could not be written later (a directory,
    a missing or read-only directory): create and remove a temporary file beside it
    (a stream is not opened: a FIFO's reader would see its end)."""
    OutputFile(path, what).discard()
    return Path(path)
