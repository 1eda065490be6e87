"""A trace held in memory, built from record dicts (tests, tools, generators)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator

import numpy as np

from cpasim.errors import CpasimError
from cpasim.tracing.jsonl import parse_record
from cpasim.tracing.records import RECORD_DTYPE, TraceKey, TraceSource


class MemorySource(TraceSource):
    """Chunks of :data:`RECORD_DTYPE` plus their key, all in memory."""

    def __init__(self, chunks: list[np.ndarray], key: TraceKey, name: str = "<memory>"):
        self._chunks = chunks
        self.key = key
        self.name = name

    @classmethod
    def from_dicts(
        cls, records: Iterable[dict], name: str = "<memory>", chunk_records: int = 65536
    ) -> MemorySource:
        """Validate and convert dicts with the JSON Lines fields.

        A bad record raises :class:`CpasimError` naming ``name`` and the record
        number (from 1).
        """
        key = TraceKey()
        rows: list[tuple] = []
        last_t = -math.inf
        for number, obj in enumerate(records, 1):
            try:
                row = parse_record(obj, key, last_t)
            except ValueError as exc:
                raise CpasimError(f"{name}: record {number}: {exc}") from None
            last_t = row[0]
            rows.append(row)
        chunks = [
            np.array(rows[i : i + chunk_records], dtype=RECORD_DTYPE)
            for i in range(0, len(rows), chunk_records)
        ]
        return cls(chunks, key, name)

    def __len__(self) -> int:
        return sum(len(c) for c in self._chunks)

    def chunks(self) -> Iterator[np.ndarray]:
        yield from self._chunks
