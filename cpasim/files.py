"""Output files: written completely under a temporary name, then renamed into place.

A reader never sees half a file, and an error leaves what the path held untouched.
The temporary file is made private (``mkstemp``), so before the rename it gets the
mode a plain ``open(path, "w")`` would have given it: 0666 less the user's umask.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path


def umask_mode() -> int:
    """0666 less the process's umask (reading the umask means setting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def replace_atomically(path: str | Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` the whole file, give it the umask's mode, rename it to ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomically(path: str | Path, text: str) -> None:
    replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
