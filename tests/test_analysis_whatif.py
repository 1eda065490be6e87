"""What-if predictions checked against traces recorded with the change (Saidi 5.4-5.5).

The credit loop of fig 5.4: a producer A needs a credit for each item it sends
to consumer B; B returns the credit when done with the item.  With C credits
the path loops back through B's credit edge; ``capacity(credits, +k)`` must
predict exactly the path of the trace recorded with C + k credits.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from cpasim.analysis import Transforms, analyze, analyze_many
from cpasim.analysis.transforms import NameSet
from cpasim.errors import CpasimError
from cpasim.tracing.memory import MemorySource


def credit_loop_trace(credits: int, items: int = 40, a_work=None, b_work=None) -> MemorySource:
    """A tiny deterministic producer/consumer with a credit pool, fully annotated.

    A: take a credit (waiting when none), work a_j, enqueue item j.
    B: take item j (waiting when none), work b_j, give the credit back.
    Times follow from max-plus recurrences; records are ordered by (time, the
    order they happen in), which is causal because every dependency points
    from an earlier item (or earlier in the same item) to a later one.
    """
    a_work = a_work or (lambda j: 3 + (7 * j) % 5)
    b_work = b_work or (lambda j: 4 + (3 * j) % 7)
    rows = []  # (t, rank, record)

    def emit(t, rec):
        rows.append((t, len(rows), {"t": t, **rec}))

    A = {"sys": "h", "sm": "A"}
    Bm = {"sys": "h", "sm": "B"}
    emit(0, {"op": "declare", **A, "q": "credits", "conn_flow": False})
    emit(0, {"op": "resize", **A, "q": "credits", "n": credits})
    emit(0, {"op": "begin", **Bm, "state": "idle"})
    t_a = 0
    done = []  # B's finish time per item
    sent = []
    t_b = 0
    for j in range(items):
        emit(t_a, {"op": "begin", **A, "state": "get credit"})
        avail = 0 if j < credits else done[j - credits]
        if avail > t_a:
            emit(t_a, {"op": "wait_empty", **A, "q": "credits"})
        got = max(t_a, avail)
        emit(got, {"op": "deq", **A, "q": "credits"})
        emit(got, {"op": "begin", **A, "state": "produce"})
        s = got + a_work(j)
        emit(s, {"op": "begin", **A, "state": "send"})
        emit(s, {"op": "enq", **A, "q": "data"})
        sent.append(s)
        t_a = s
        # B picks the item up
        if s > t_b:
            emit(t_b, {"op": "wait_empty", **Bm, "q": "data", "qsys": "h"})
        start = max(s, t_b)
        emit(start, {"op": "deq", **Bm, "q": "data"})
        emit(start, {"op": "begin", **Bm, "state": "consume"})
        fin = start + b_work(j)
        emit(fin, {"op": "enq", **Bm, "q": "credits"})
        emit(fin, {"op": "begin", **Bm, "state": "idle"})
        done.append(fin)
        t_b = fin
        # Credits returned before A's next request must precede it in the trace:
        # the sort below orders by time, then by this emission order.
    emit(t_a, {"op": "begin", **A, "state": "done"})
    rows.sort(key=lambda r: (r[0], r[1]))
    return MemorySource.from_dicts([r[2] for r in rows], name=f"credits={credits}")


@pytest.mark.parametrize("credits", [1, 2, 3])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_capacity_on_credit_pool_predicts_the_larger_pool(credits, k):
    small = credit_loop_trace(credits)
    big = credit_loop_trace(credits + k)
    base, pred = analyze_many(
        small, "h:A", "h:B", [Transforms(), Transforms(capacity=[("h:credits", k)])]
    )
    real = analyze(big, "h:A", "h:B")
    assert base.critical_path_ns == pytest.approx(base.elapsed_ns, rel=1e-12)
    assert real.critical_path_ns == pytest.approx(real.elapsed_ns, rel=1e-12)
    # the prediction is exact: same durations, only the credit matching changes
    assert pred.critical_path_ns == pytest.approx(real.critical_path_ns, rel=1e-12)
    assert pred.critical_path_ns <= base.critical_path_ns
    assert base.warnings == [] and real.warnings == []


def test_credit_loop_is_found_and_breaking_it_bounds_the_gain():
    # One credit and a slow consumer: every item waits for the previous credit.
    # With one credit A produces only after B returned the previous one: the path
    # goes A -> B -> A for every item.
    tr = credit_loop_trace(1)
    base = analyze(tr, "h:A", "h:B")
    # items 1..39 each wait for the previous item's credit (item 0 used the initial one)
    assert base.loops == [{"edge": "h:B->h:A[h:credits]", "count": 39}]
    unlimited = analyze(tr, "h:A", "h:B", transforms=Transforms(breaks=["h:credits"]))
    many = analyze(credit_loop_trace(1000), "h:A", "h:B")
    # Breaking the credit queue = infinitely many credits.
    assert unlimited.critical_path_ns == pytest.approx(many.critical_path_ns, rel=1e-12)
    assert unlimited.loops == []


def test_scaling_predicts_the_faster_consumer():
    slow = credit_loop_trace(2, b_work=lambda j: 10)
    fast = credit_loop_trace(2, b_work=lambda j: 5)
    pred = analyze(slow, "h:A", "h:B", transforms=Transforms(scale=[("h:B:consume", 0.5)]))
    real = analyze(fast, "h:A", "h:B")
    # Waiting edges are zero in both, so halving B's work is predicted exactly.
    assert pred.critical_path_ns == pytest.approx(real.critical_path_ns, rel=1e-12)


def test_analyze_many_matches_separate_passes():
    tr = credit_loop_trace(2)
    tfs = [
        Transforms(),
        Transforms(scale=[("h:A:*", 0.5)]),
        Transforms(capacity=[("h:credits", 3)]),
        Transforms(breaks=["h:credits"]),
    ]
    together = analyze_many(tr, "h:A", "h:B", tfs)
    for tf, res in zip(tfs, together, strict=True):
        alone = analyze(tr, "h:A", "h:B", transforms=tf)
        assert res.to_json() == alone.to_json()


_part = st.text(alphabet="ab#:*?[]!0", min_size=1, max_size=6)


@given(
    patterns=st.lists(st.builds(lambda a, b: f"{a}:{b}", _part, _part), min_size=1, max_size=6),
    sm=st.text(alphabet="ab:#", min_size=1, max_size=4),
    inst=st.sampled_from(["0", "1", "a#"]),
    state=st.text(alphabet="ab:*#", max_size=4),
)
# The two names match different patterns: the earlier pattern wins.
@example(patterns=["a:b:?", "a:b#1*"], sm="b", inst="1", state="a")
def test_state_factor_is_the_first_matching_pattern_of_either_name(patterns, sm, inst, state):
    # The definition (first pattern either display name matches, fnmatchcase),
    # against the one-regex matcher state_factor uses.
    try:
        tf = Transforms(scale=[(p, float(i + 2)) for i, p in enumerate(patterns)])
    except CpasimError:  # an unbalanced "[" is refused up front
        return
    names = [f"a:{sm}:{state}"] + ([f"a:{sm}#{inst}:{state}"] if inst != "0" else [])
    want = next(
        (float(i + 2) for i, p in enumerate(patterns) if any(fnmatchcase(n, p) for n in names)),
        1.0,
    )
    assert tf.state_factor("a", sm, inst, state) == want


@given(
    patterns=st.lists(st.builds(lambda a, b: f"{a}:{b}", _part, _part), min_size=1, max_size=6),
    names=st.lists(
        st.tuples(
            st.text(alphabet="ab:#\n", min_size=1, max_size=4),
            st.sampled_from(["0", "1", "a#"]),
            st.text(alphabet="ab:*#\n", max_size=4),
        ),
        max_size=8,
    ),
)
# A negated class could take the line break between two names matched together.
@example(patterns=["a:b:[!x]a:b#1:"], names=[("b", "0", ""), ("b", "1", "")])
def test_state_factors_of_many_names_are_each_ones_factor(patterns, names):
    # state_factors matches the distinct names of the whole list together (as
    # the lines of one text); the result must be each name's definition.
    try:
        tf = Transforms(scale=[(p, float(i + 2)) for i, p in enumerate(patterns)])
    except CpasimError:
        return
    want = []
    for sm, inst, state in names:
        shown = [f"a:{sm}:{state}"] + ([f"a:{sm}#{inst}:{state}"] if inst != "0" else [])
        want.append(
            next(
                (
                    float(i + 2)
                    for i, p in enumerate(patterns)
                    if any(fnmatchcase(n, p) for n in shown)
                ),
                1.0,
            )
        )
    shown = NameSet.of_states(("a", sm, inst, state) for sm, inst, state in names)
    assert tf.state_factors(shown) == want
