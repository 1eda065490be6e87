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
"""

from __future__ import annotations

import os
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


def check_target(path: str | Path, what: str = "output file") -> Path:
    """Refuse a target that cannot be a file: a directory, or one in a missing directory."""
    path = Path(path)
    if path.is_dir():
        raise CpasimError(f"{path}: cannot write {what}: it is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise CpasimError(f"{path}: cannot write {what}: the directory {parent} does not exist")
    return path


class OutputFile:
    """One output file being written: a fresh temporary file beside ``path``.

    Write to :attr:`tmp` (or the open :attr:`fd`), then :meth:`commit` to rename it
    into place, :meth:`discard` to drop it, or :meth:`keep_partial` to keep it
    under a name of its own.  Creating one checks at once that ``path`` can be
    written, so a command can refuse an unwritable output before it starts work.
    """

    def __init__(self, path: str | Path, what: str = "output file"):
        self.path = check_target(path, what)
        self.what = what
        try:
            self.fd, tmp = tempfile.mkstemp(
                prefix=f".{self.path.name}.", suffix=TEMP_SUFFIX, dir=self.path.parent
            )
        except OSError as exc:
            raise write_error(self.path, exc, what) from None
        self.tmp = Path(tmp)
        self.done = False

    def open(self, mode: str = "wb", **kwargs):
        """The temporary file as a Python file object (owns :attr:`fd` from then on)."""
        fd, self.fd = self.fd, None
        return os.fdopen(fd, mode, **kwargs)

    def _close_fd(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def commit(self) -> Path:
        """Rename the finished temporary file to ``path``."""
        self._close_fd()
        try:
            os.chmod(self.tmp, umask_mode())
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.discard()
            raise write_error(self.path, exc, self.what) from None
        self.done = True
        return self.path

    def discard(self) -> None:
        """Remove the temporary file; ``path`` keeps what it held."""
        self._close_fd()
        self.tmp.unlink(missing_ok=True)
        self.done = True

    def keep_partial(self) -> Path:
        """Keep the temporary file as ``<stem>.partial<suffix>`` (numbered if that name
        is taken; an existing file is never replaced); returns where it is."""
        self._close_fd()
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
    """
    with OutputFile(path) as out:
        out._close_fd()
        write(out.tmp)
    return out.path


def write_text_atomically(path: str | Path, text: str) -> Path:
    return replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def check_writable(path: str | Path, what: str = "output file") -> Path:
    """Fail now, with one line, if ``path`` could not be written later (a directory,
    a missing or read-only directory): create and remove a temporary file beside it."""
    OutputFile(path, what).discard()
    return Path(path)
