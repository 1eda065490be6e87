"""The compact trace file (``.cpt``): record chunks streamed to disk during a run.

Layout (all integers little-endian)::

    header   MAGIC (8 bytes)  version u16  record size u16  reserved u32
    block*   tag (4 bytes)  payload length u64  crc32 u32  payload
    footer   a block with tag END

The crc32 of each block covers its number in the file (u32, counting from 1 after
the header), its tag, its length and its payload: a block removed, repeated or
moved leaves every block after it with a wrong checksum, so a file spliced from
others (with a footer redone to match) is refused, not read as complete.  (Files
of version 1 had no number in the checksum; they are still read.)  Block tags:

- ``KEYS``: the names added to the :class:`TraceKey` since the previous KEYS block, as
  UTF-8 JSON ``{"base": [sms, states, queues, conns], "sms": [[sys, sm, inst], ...],
  "states": [...], "queues": [[qsys, q, qinst], ...], "conns": [...]}``; ``base`` is
  how many names of each kind came before (a consistency check).
- ``RECS``: a u64 record count followed by that many records, the raw bytes of a
  :data:`RECORD_DTYPE` array.  A records block refers only to names already given.
- ``END``: u64 total records and u64 number of RECS blocks.  A file is valid only
  with its footer: a file whose writer did not close it reads as truncated.

:class:`CptWriter` writes beside its path under a fresh temporary name and renames
the file into place when it closes (:mod:`cpasim.files`): a reader of that path
never meets an unfinished trace, and a failed run leaves the old one there.
It hashes what it writes as it writes it: :attr:`CptWriter.digest` is the
:func:`frame_digest` of the bytes this process wrote, whatever the path holds by
the time anyone asks (another run may have replaced the file since).

Writer and reader hold one chunk at a time, so memory does not depend on trace length.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from cpasim.errors import CpasimError, shown
from cpasim.files import OutputFile, write_error
from cpasim.inputs import open_input, read_error
from cpasim.tracing.records import RECORD_DTYPE, TraceKey, TraceSource
from cpasim.tracing.validate import check_chunk, check_name

MAGIC = b"CPASIMT\x00"
VERSION = 2
#: Versions read: 1 (checksums without block numbers) and the current one.
READ_VERSIONS = (1, VERSION)
HEADER = struct.Struct("<8sHHI")
FRAME = struct.Struct("<4sQI")
COUNT = struct.Struct("<Q")
FOOTER = struct.Struct("<QQ")
TAG_KEYS, TAG_RECS, TAG_END = b"KEYS", b"RECS", b"END\x00"
_KINDS = ("sms", "states", "queues", "conns")


def crc_start(version: int, number: int) -> int:
    """The crc32 a block's checksum starts from: its number (from 1) since version 2."""
    return zlib.crc32(struct.pack("<I", number)) if version >= 2 else 0


def block_frame(number: int, tag: bytes, payload_len: int, *payload_parts) -> bytes:
    """The frame of block ``number`` (current version) with the payload ``payload_parts``."""
    head = struct.pack("<4sQ", tag, payload_len)
    crc = zlib.crc32(head, crc_start(VERSION, number))
    for part in payload_parts:
        crc = zlib.crc32(part, crc)
    return head + struct.pack("<I", crc)


class CptWriter:
    """Writes a ``.cpt`` file chunk by chunk; a :class:`~cpasim.tracing.tracer.Tracer` sink."""

    #: Keeps nothing of a chunk once :meth:`write` returns (the tracer may reuse it).
    done_with_chunk_after_write = True

    def __init__(self, path: str | Path):
        self.path = Path(path)
        # Written beside ``path`` under a fresh name; renamed into place by close().
        self._out = OutputFile(self.path, "trace file")
        #: Where close() put the file: ``path``, or the partial file (:meth:`keep_partial`).
        self.written: Path | None = None
        self._partial = False
        self._fh = self._out.open("wb")
        header = HEADER.pack(MAGIC, VERSION, RECORD_DTYPE.itemsize, 0)
        self._fh.write(header)
        # frame_digest of what is written, taken as it is written.
        self._hash = hashlib.sha256(header)
        self._size = len(header)
        self._number = 0  # blocks written
        self._key_sizes = (0, 0, 0, 0)
        self.records = 0
        self.blocks = 0
        #: ``trace_digest`` of the file written, once closed.
        self.digest: str | None = None

    def _block(self, tag: bytes, *parts) -> None:
        """Write one block: its frame, then ``parts`` (the payload)."""
        self._number += 1
        length = sum(len(p) for p in parts)
        head = block_frame(self._number, tag, length, *parts)
        self._hash.update(head)
        self._size += len(head) + length
        fh = self._fh
        fh.write(head)
        for part in parts:
            fh.write(part)

    def write(self, chunk: np.ndarray, key: TraceKey) -> None:
        """Append the names new in ``key``, then ``chunk``."""
        if chunk.dtype != RECORD_DTYPE:
            raise TypeError(f"trace chunk has dtype {chunk.dtype}, expected RECORD_DTYPE")
        self._write_key_delta(key)
        if len(chunk) == 0:
            return
        count = COUNT.pack(len(chunk))
        data = np.ascontiguousarray(chunk).view(np.uint8)  # the bytes, not a copy
        self._block(TAG_RECS, count, data)
        self.records += len(chunk)
        self.blocks += 1

    def _write_key_delta(self, key: TraceKey) -> None:
        sizes = key.sizes()
        if sizes == self._key_sizes:
            return
        delta = {"base": list(self._key_sizes)}
        for kind, start in zip(_KINDS, self._key_sizes, strict=True):
            delta[kind] = getattr(key, kind)[start:]
        payload = json.dumps(delta, ensure_ascii=False, separators=(",", ":")).encode()
        self._block(TAG_KEYS, payload)
        self._key_sizes = sizes

    def keep_partial(self) -> None:
        """Make :meth:`close` keep the file under a partial name (the run was
        interrupted) instead of replacing ``path`` with it."""
        self._partial = True

    def close(self, key: TraceKey | None = None) -> None:
        """Write the footer (and names not yet written, if ``key`` is given), then
        rename the file into place (or keep it as a partial file, :meth:`keep_partial`)."""
        if self._fh.closed:
            return
        try:
            if key is not None:
                self._write_key_delta(key)
            self._block(TAG_END, FOOTER.pack(self.records, self.blocks))
            self._fh.close()
        except OSError as exc:
            self.abandon()
            raise write_error(self.path, exc, "trace file") from None
        except BaseException:
            self.abandon()
            raise
        self._hash.update(COUNT.pack(self._size))
        self.digest = "cpt:" + self._hash.hexdigest()
        self.written = self._out.keep_partial() if self._partial else self._out.commit()

    def abandon(self) -> None:
        """Stop writing and delete the unfinished file (``path`` keeps what it held)."""
        with contextlib.suppress(OSError):  # thrown away: a failed flush does not matter
            self._fh.close()
        self._out.discard()

    def __enter__(self) -> CptWriter:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if kind is None:
            self.close()
        else:
            self.abandon()


class CptSource(TraceSource):
    """A ``.cpt`` file read block by block; ``key`` grows as chunks are read."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.name = str(path)
        self.key = TraceKey()
        # Names blocks already taken, by byte offset: (length, checksum).  A re-read
        # skips those whose frame still says the same.
        self._names_taken: dict[int, tuple[int, int]] = {}
        with _opened(self.name) as fh:
            self._read_header(fh)

    def _read_header(self, fh) -> None:
        head = fh.read(HEADER.size)
        if not head:
            raise CpasimError(f"{self.name}: not a cpasim trace file (it is empty: 0 bytes)")
        if len(head) < len(MAGIC) or head[: len(MAGIC)] != MAGIC:
            raise CpasimError(f"{self.name}: not a cpasim trace file (no {MAGIC[:-1]!r} header)")
        if len(head) < HEADER.size:
            raise CpasimError(f"{self.name}: truncated in the file header")
        _, version, itemsize, reserved = HEADER.unpack(head)
        if version not in READ_VERSIONS:
            raise CpasimError(
                f"{self.name}: trace format version {version} is not supported "
                f"(this cpasim reads versions {READ_VERSIONS[0]} to {VERSION})"
            )
        self.version = version
        if itemsize != RECORD_DTYPE.itemsize:
            raise CpasimError(
                f"{self.name}: record size {itemsize} bytes, expected {RECORD_DTYPE.itemsize}"
            )
        if reserved != 0:
            raise CpasimError(f"{self.name}: corrupted file header (reserved field {reserved})")

    def chunks(self, since: float | None = None) -> Iterator[np.ndarray]:
        """The records in order; with ``since``, only those at time ``since`` or later.

        A records block whose last record is earlier than ``since`` is not
        parsed (its names are still taken, so the key is the same as after
        reading it): reading the tail of a long trace analyses the tail.  A
        skipped block is still checksum-checked, since the decision to skip it
        rests on its bytes (a corrupted time could skip records of the tail).
        """
        with _opened(self.name) as fh:
            yield from self._blocks(fh, since)

    def read_names(self) -> TraceKey:
        """Take every name the file defines, reading no records; returns ``key``.

        Records blocks are passed over unread and unchecked: the names do not
        depend on them (a reader of the records checks them)."""
        with _opened(self.name) as fh:
            for _ in self._blocks(fh, float("inf"), check_skipped=False):
                pass
        return self.key

    def _blocks(
        self, fh, since: float | None = None, check_skipped: bool = True
    ) -> Iterator[np.ndarray]:
        size = os.fstat(fh.fileno()).st_size
        self._read_header(fh)
        self._t_last = -np.inf
        pos = HEADER.size
        block = 0
        records = 0
        rec_blocks = 0
        while True:
            block += 1
            where = f"block {block} (byte {pos}, after record {records})"
            frame = fh.read(FRAME.size)
            if len(frame) < FRAME.size:
                raise CpasimError(
                    f"{self.name}: truncated at {where}: the file ends before its closing "
                    "footer (was the trace still being written?)"
                )
            tag, length, crc = FRAME.unpack(frame)
            if tag not in (TAG_KEYS, TAG_RECS, TAG_END):
                raise CpasimError(f"{self.name}: corrupted at {where}: unknown block type {tag!r}")
            if length > size - pos - FRAME.size:
                raise CpasimError(
                    f"{self.name}: truncated at {where}: the block runs past the end of the file "
                    "(an unfinished or corrupted trace)"
                )
            if tag == TAG_KEYS and self._names_taken.get(pos) == (length, crc):
                fh.seek(length, os.SEEK_CUR)
                pos += FRAME.size + length
                continue
            if since is not None and tag == TAG_RECS and length >= COUNT.size:
                skipped = self._skip_before(fh, length, since)
                if skipped and check_skipped:
                    self._check_skipped(fh, frame, length, crc, block, where)
                if skipped:
                    pos += FRAME.size + length
                    records += skipped
                    rec_blocks += 1
                    continue
            payload = bytearray(length)
            fh.readinto(payload)
            block_at = pos
            pos += FRAME.size + length
            start = zlib.crc32(frame[:12], crc_start(self.version, block))
            if zlib.crc32(payload, start) != crc:
                raise CpasimError(f"{self.name}: checksum mismatch in {where}: {_CORRUPTED}")
            if tag == TAG_KEYS:
                self._apply_key_delta(payload, where)
                self._names_taken[block_at] = (length, crc)
            elif tag == TAG_RECS:
                chunk = self._records(payload, where, records)
                records += len(chunk)
                rec_blocks += 1
                if since is not None:
                    chunk = chunk[int(np.searchsorted(chunk["t"], since, side="left")) :]
                    since = None  # every later record is at ``since`` or later
                yield chunk
            else:
                self._check_footer(payload, where, records, rec_blocks, pos, size)
                return

    def _skip_before(self, fh, length: int, since: float) -> int:
        """Skip the records block at ``fh`` if all its records are before ``since``:
        return its record count, or 0 (``fh`` back at the block's start) to read it."""
        start = fh.tell()
        head = fh.read(COUNT.size)
        (count,) = COUNT.unpack(head)
        last_at = COUNT.size + (count - 1) * RECORD_DTYPE.itemsize
        if count and last_at + 8 <= length:
            fh.seek(start + last_at)
            (t_last,) = struct.unpack("<d", fh.read(8))
            if t_last < since:
                fh.seek(start + length)
                self._t_last = t_last
                return count
        fh.seek(start)
        return 0

    def _check_skipped(
        self, fh, frame: bytes, length: int, crc: int, number: int, where: str
    ) -> None:
        """Checksum the block just skipped (``fh`` at its end) without parsing it."""
        end = fh.tell()
        fh.seek(end - length)
        got = zlib.crc32(frame[:12], crc_start(self.version, number))
        left = length
        while left:
            piece = fh.read(min(left, 1 << 20))
            if not piece:
                break
            got = zlib.crc32(piece, got)
            left -= len(piece)
        if got != crc:
            raise CpasimError(f"{self.name}: checksum mismatch in {where}: {_CORRUPTED}")

    def _apply_key_delta(self, payload: bytearray, where: str) -> None:
        bad = f"{self.name}: corrupted names in {where}"
        try:
            delta = json.loads(payload.decode())
        except (ValueError, RecursionError):
            raise CpasimError(f"{bad}: not JSON") from None
        if not isinstance(delta, dict) or set(delta) != {"base", *_KINDS}:
            raise CpasimError(f"{bad}: expected an object with base, {', '.join(_KINDS)}")
        base = delta["base"]
        if not (
            isinstance(base, list)
            and len(base) == len(_KINDS)
            and all(isinstance(b, int) and not isinstance(b, bool) and b >= 0 for b in base)
        ):
            raise CpasimError(f"{bad}: 'base' must be {len(_KINDS)} counts")
        key = self.key
        for kind, start in zip(_KINDS, base, strict=True):
            names = delta[kind]
            if not isinstance(names, list):
                raise CpasimError(f"{bad}: {kind!r} must be a list")
            have = getattr(key, kind)
            intern = getattr(key, "intern_" + kind[:-1])
            if start > len(have):
                raise CpasimError(f"{self.name}: {where}: names of {kind} missing before it")
            for i, name in enumerate(names, start):
                try:
                    name = _key_name(kind, name)
                except ValueError as exc:
                    raise CpasimError(f"{bad}: {kind} id {i}: {exc}") from None
                # Re-reading the file meets names the key already holds: they must agree.
                if i < len(have):
                    if have[i] != name:
                        raise CpasimError(f"{self.name}: {where}: {kind} id {i} changed name")
                elif (intern(*name) if isinstance(name, tuple) else intern(name)) != i:
                    raise CpasimError(f"{bad}: {kind} id {i} repeats the name {shown(name)}")

    def _records(self, payload: bytearray, where: str, before: int) -> np.ndarray:
        if len(payload) < COUNT.size:
            raise CpasimError(f"{self.name}: corrupted records in {where}: no record count")
        (count,) = COUNT.unpack_from(payload)
        if len(payload) != COUNT.size + count * RECORD_DTYPE.itemsize:
            raise CpasimError(
                f"{self.name}: corrupted records in {where}: {count} records announced, "
                f"{len(payload) - COUNT.size} bytes present"
            )
        chunk = np.frombuffer(payload, dtype=RECORD_DTYPE, offset=COUNT.size)
        check_chunk(chunk, self.key, self.name, before, self._t_last)
        if count:
            self._t_last = float(chunk["t"][-1])
        return chunk

    def _check_footer(self, payload, where, records, rec_blocks, pos, size) -> None:
        if len(payload) != FOOTER.size:
            raise CpasimError(f"{self.name}: corrupted footer at {where}")
        total, blocks = FOOTER.unpack(payload)
        if (total, blocks) != (records, rec_blocks):
            raise CpasimError(
                f"{self.name}: footer at {where} announces {total} records in {blocks} blocks, "
                f"the file holds {records} in {rec_blocks}"
            )
        if pos != size:
            raise CpasimError(f"{self.name}: {size - pos} unexpected bytes after the footer")


@contextlib.contextmanager
def _opened(path: str | Path):
    with open_input(path, "trace") as fh:
        try:
            yield fh
        except OSError as exc:  # a read failed (EIO)
            raise read_error(path, exc, "trace") from None


def frame_digest(path: str | Path) -> str:
    """A digest of the file's header and every block's frame (tag, length, checksum).

    Each block's checksum covers its content, so this names the content of the
    whole file (as far as the blocks read are checksum-checked, which every read
    does) while reading only the frames: a few hundred small reads for a large
    trace.  It binds a run's sidecar to its trace.
    """
    import hashlib

    digest = hashlib.sha256()
    name = str(path)
    with _opened(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        digest.update(fh.read(HEADER.size))
        pos = HEADER.size
        while pos < size:
            frame = fh.read(FRAME.size)
            if len(frame) < FRAME.size:
                raise CpasimError(f"{name}: truncated at byte {pos} (no closing footer)")
            digest.update(frame)
            tag, length, _ = FRAME.unpack(frame)
            pos += FRAME.size + length
            fh.seek(pos)
            if tag == TAG_END:
                break
        digest.update(COUNT.pack(size))
    return digest.hexdigest()


_CORRUPTED = "the file is corrupted (its bytes changed, or a block was removed, repeated or moved)"

#: Kinds of names given as (system, name, instance) triples; the others are strings.
_TRIPLES = ("sms", "queues")


def _key_name(kind: str, value: object) -> str | tuple[str, str, str]:
    """One name of a KEYS block, checked as the JSON Lines reader checks names."""
    if kind not in _TRIPLES:
        return check_name(value, kind[:-1])
    if not isinstance(value, list) or len(value) != 3:
        raise ValueError(f"expected [system, name, instance], got {shown(json.dumps(value))}")
    return tuple(check_name(v, kind[:-1]) for v in value)


def read_cpt(path: str | Path) -> CptSource:
    """Open a ``.cpt`` file for streaming (checks the header now, the rest while reading)."""
    return CptSource(path)


def write_cpt(source: TraceSource, path: str | Path, *, partial: bool = False) -> int:
    """Write any :class:`TraceSource` as a ``.cpt`` file; returns the record count.

    The file appears only once complete (written next to it, then renamed), so an
    error while reading ``source`` leaves whatever ``path`` held untouched.
    ``partial``: keep it under a partial name instead (:meth:`CptWriter.keep_partial`;
    ``writer.written`` says where).
    """
    return _write_cpt(source, path, partial).records


def _write_cpt(source: TraceSource, path: str | Path, partial: bool) -> CptWriter:
    writer = CptWriter(path)
    if partial:
        writer.keep_partial()
    try:
        for chunk in source.chunks():
            writer.write(np.asarray(chunk, dtype=RECORD_DTYPE), source.key)
    except OSError as exc:
        writer.abandon()
        raise write_error(path, exc, "trace file") from None
    except BaseException:
        writer.abandon()
        raise
    writer.close(source.key)
    return writer
