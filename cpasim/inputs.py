"""Input files: opened only when they are regular files, read with a bound.

Every file cpasim reads (scenarios, traces and their sidecars, captures,
measurement reports, sweep tables, series) is opened here, which promises:

- a FIFO, a device, a socket or a directory is refused with one line naming the
  file and what it is, before a byte is read: opening a FIFO waits for a writer
  that may never come (and a trace is read several times over), ``/dev/zero``
  and ``/dev/urandom`` never end, a terminal waits for a person;
- a path that cannot be opened (missing, under a file instead of a directory, a
  symbolic-link loop, a name too long, no permission) or read (``EIO`` from
  ``/proc/self/mem`` or a failing disk) is one :class:`InputError` naming the
  file, never a traceback;
- :func:`read_bytes` reads at most a bound: a text input larger than any real
  one is refused rather than read into memory.

The kind is checked on the file opened (``fstat``), not only on the name, so a
name swapped for a FIFO between the check and the open is still refused.  The
open uses ``O_NONBLOCK`` (so that a FIFO it meets returns at once instead of
waiting for a writer) and ``O_NOCTTY``; the flag is cleared once the file is
known to be a regular one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO

from cpasim.errors import CpasimError

#: Largest text input read whole (scenarios, sidecars, iperf3 reports, tables).
TEXT_LIMIT = 64 << 20

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (a named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputError(CpasimError):
    """An input file that cannot be read; ``errno`` says why when the system did."""

    def __init__(self, message: str, errno: int | None = None):
        super().__init__(message)
        self.errno = errno


def kind_of(mode: int) -> str | None:
    """What a file of ``st_mode`` ``mode`` is when it is not a regular file."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def read_error(path: str | Path, exc: OSError, what: str) -> InputError:
    """The one-line error for an ``OSError`` met reading ``path`` (the ``what``)."""
    reason = exc.strerror or str(exc)
    return InputError(f"{path}: cannot read {what}: {reason}", exc.errno)


def _refuse(path: str | Path, kind: str, what: str) -> InputError:
    return InputError(f"{path}: cannot read {what}: it is {kind}, not a regular file")


def open_input(path: str | Path, what: str = "file") -> BinaryIO:
    """``path`` opened for reading in binary, when it is a regular file."""
    try:
        kind = kind_of(os.stat(path).st_mode)
    except OSError as exc:
        raise read_error(path, exc, what) from None
    if kind is not None:  # refused before it is opened: opening a device may act
        raise _refuse(path, kind, what)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise read_error(path, exc, what) from None
    try:
        kind = kind_of(os.fstat(fd).st_mode)
        if kind is not None:
            raise _refuse(path, kind, what)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bytes(path: str | Path, what: str = "file", limit: int = TEXT_LIMIT) -> bytes:
    """The whole content of the regular file ``path``; refused past ``limit`` bytes."""
    with open_input(path, what) as fh:
        try:
            data = fh.read(limit + 1)
        except OSError as exc:
            raise read_error(path, exc, what) from None
    if len(data) > limit:
        raise InputError(
            f"{path}: cannot read {what}: larger than {limit >> 20} MiB, more than any "
            f"{what} holds",
            errno.EFBIG,
        )
    return data


def read_text(path: str | Path, what: str = "file", limit: int = TEXT_LIMIT) -> str:
    """:func:`read_bytes` decoded as UTF-8; text that is not UTF-8 is one line too."""
    data = read_bytes(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: cannot read {what}: not UTF-8 text (byte {exc.start})", errno.EILSEQ
        ) from None
