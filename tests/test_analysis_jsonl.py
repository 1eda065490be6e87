"""JSON Lines traces and in-memory sources: good fixtures read, bad ones named precisely."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cpasim.errors import CpasimError
from cpasim.tracing.jsonl import read_jsonl, write_jsonl
from cpasim.tracing.memory import MemorySource
from cpasim.tracing.records import DECLARE, DEQ, FLAG_CONN_FLOW, LINK, RECORD_DTYPE

TRACES = Path(__file__).parent / "traces"
GOOD = ["stack_driver", "birdhouse", "link_call", "two_conns"]

# (fixture, line the reader must name, words the message must contain)
BAD = [
    ("bad_json", 2, "malformed JSON"),
    ("bad_missing_field", 3, "missing field 'sm'"),
    ("bad_unknown_field", 1, "unknown field 'colour'"),
    ("bad_unknown_op", 2, 'unknown op "dequeue"'),
    ("bad_wrong_type", 1, "field 't' must be a finite number"),
    ("bad_time_backwards", 3, "time goes backwards"),
    ("bad_link_without_to", 2, "needs field 'to'"),
]


def _all(source):
    chunks = list(source.chunks())
    return np.concatenate(chunks) if chunks else np.zeros(0, RECORD_DTYPE)


@pytest.mark.parametrize("name", GOOD)
def test_good_fixtures_read_and_round_trip(name, tmp_path):
    src = read_jsonl(TRACES / f"{name}.jsonl")
    recs = _all(src)
    lines = [ln for ln in (TRACES / f"{name}.jsonl").read_text().splitlines() if ln.strip()]
    assert len(recs) == len(lines)
    assert np.all(np.diff(recs["t"]) >= 0)
    out = tmp_path / "copy.jsonl"
    write_jsonl(src, out)
    again = read_jsonl(out)
    recs2 = _all(again)
    assert np.array_equal(recs, recs2)
    assert again.key.sms == src.key.sms
    assert again.key.queues == src.key.queues


@pytest.mark.parametrize(("name", "line", "words"), BAD)
def test_bad_fixture_names_file_and_line(name, line, words):
    path = TRACES / f"{name}.jsonl"
    with pytest.raises(CpasimError) as err:
        _all(read_jsonl(path))
    msg = str(err.value)
    assert msg.startswith(f"{path}:{line}: "), msg
    assert words in msg
    assert "\n" not in msg


def test_defaults_and_declare_fields():
    src = MemorySource.from_dicts(
        [
            {
                "t": 0,
                "op": "declare",
                "sys": "a",
                "sm": "S",
                "inst": 3,
                "q": "Q",
                "capacity": 4,
                "conn_flow": False,
            },
            {
                "t": 1,
                "op": "deq",
                "sys": "a",
                "sm": "S",
                "inst": "3",
                "q": "Q",
                "qsys": "b",
                "n": -1,
            },
            {
                "t": 2,
                "op": "link",
                "sys": "a",
                "sm": "S",
                "inst": "3",
                "to": {"sys": "b", "sm": "T"},
            },
        ]
    )
    recs = _all(src)
    assert recs["op"].tolist() == [DECLARE, DEQ, LINK]
    assert recs["n"].tolist()[:2] == [4, -1]
    assert recs["flags"][0] & FLAG_CONN_FLOW == 0
    # qinst defaults to the emitter's inst, qsys to its sys unless given
    assert src.key.queues == [("a", "Q", "3"), ("b", "Q", "3")]
    assert src.key.sms == [("a", "S", "3"), ("b", "T", "0")]


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"t": 0, "op": "enq", "sys": "a", "sm": "S", "q": "Q", "n": -1}, "must be >= 0"),
        ({"t": 0, "op": "enq", "sys": "a", "sm": "S", "q": "Q", "n": True}, "must be an integer"),
        ({"t": 0, "op": "begin", "sys": "a", "sm": "S", "state": "x", "q": "Q"}, "does not apply"),
        ({"t": 0, "op": "declare", "sys": "a", "sm": "S", "q": "Q", "capacity": 0}, "at least 1"),
        ({"t": 0, "op": "resize", "sys": "a", "sm": "S", "q": "Q"}, "needs field 'n'"),
        ({"t": 0, "op": "identify", "sys": "a", "sm": "S"}, "needs field 'conn'"),
        ({"t": 0, "op": "link", "sys": "a", "sm": "S", "to": "b:T"}, "field 'to' must be"),
        ({"t": float("nan"), "op": "begin", "sys": "a", "sm": "S", "state": "x"}, "finite"),
        (["not", "an", "object"], "expected a JSON object"),
    ],
)
def test_memory_source_rejects_bad_records(record, words):
    good = {"t": 0, "op": "begin", "sys": "a", "sm": "S", "state": "x"}
    with pytest.raises(CpasimError) as err:
        MemorySource.from_dicts([good, record], name="gen")
    assert str(err.value).startswith("gen: record 2: ")
    assert words in str(err.value)


def test_missing_file_is_one_clear_error(tmp_path):
    with pytest.raises(CpasimError, match="no such trace file"):
        read_jsonl(tmp_path / "nope.jsonl")


def test_reading_streams_in_chunks(tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text(
        "".join(
            f'{{"t": {i}, "op": "begin", "sys": "a", "sm": "S", "state": "s{i % 3}"}}\n'
            for i in range(1000)
        )
    )
    src = read_jsonl(path)
    src.chunk_records = 128
    sizes = [len(c) for c in src.chunks()]
    assert sizes == [128] * 7 + [104]
    assert src.key.states == ["s0", "s1", "s2"]


def test_analysis_is_the_same_through_json_lines(tmp_path):
    from cpasim.analysis import analyze
    from cpasim.analysis.synthetic import PipelineSpec, pipeline_source

    src = pipeline_source(PipelineSpec(items=60, stages=3, ring=2, window=3, seed=7))
    path = tmp_path / "pipe.jsonl"
    write_jsonl(src, path)
    direct = analyze(src, "tx:App", "rx:App").to_json()
    via_file = analyze(read_jsonl(path), "tx:App", "rx:App").to_json()
    assert via_file == direct
    assert direct["critical_path_ns"] == pytest.approx(direct["elapsed_ns"], rel=1e-12)
