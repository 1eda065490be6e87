"""The quick suite: ``scripts/test -m "not slow"``.

It is the suite run after every change, so it stays within 60 s of CPU time on a
2-core machine (docs/testing.md): anything that simulates more than a few
milliseconds of a fast link, or runs a fit, is ``@pytest.mark.slow`` and has a
smaller quick representative.  In the quick suite a hypothesis test tries at most
:data:`QUICK_EXAMPLES` examples (the whole suite, as CI runs it, tries every one its
``settings`` ask for): a property test is then a smoke test of its property, and the
search for a counterexample is CI's.
"""

from __future__ import annotations

import ctypes
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from _pytest.mark.expression import Expression  # how -m is read
from hypothesis import settings

#: Examples a hypothesis test tries in the quick suite.
QUICK_EXAMPLES = 10
#: prctl's option "signal me when my parent dies" (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: CPU seconds a process started by :func:`dies_with_this_run` may use.
CHILD_CPU_S = 120


def quick_run(config: pytest.Config) -> bool:
    """Whether this run's ``-m`` leaves out a test marked slow (``-m "not slow"``)."""
    markexpr = config.getoption("markexpr")
    return bool(markexpr) and not Expression.compile(markexpr).evaluate(lambda m, **_: m == "slow")


def cap_examples(test) -> None:
    """Have the hypothesis test ``test`` try at most :data:`QUICK_EXAMPLES` examples."""
    # @given keeps the test's settings here (hypothesis' own attribute, read by its
    # runner); an explicit max_examples wins over any profile, hence this.
    chosen = getattr(test, "_hypothesis_internal_use_settings", None)
    if chosen is not None and chosen.max_examples > QUICK_EXAMPLES:
        test._hypothesis_internal_use_settings = settings(chosen, max_examples=QUICK_EXAMPLES)


#: Families of cases (one test function over many parameters) of which the quick suite
#: runs every k-th case, spread over the family; the whole suite, as CI runs it, runs
#: each one.  The cases of a family differ in their data, not in the code they reach
#: (``tests/test_quick_guard.py`` checks that every module keeps a quick test).
QUICK_STRIDE = {
    "tests/test_params_matter.py::test_parameter_changes_the_run": 4,
    "tests/test_determinism.py::test_same_seed_same_results_and_tracing_changes_nothing": 3,
    "tests/test_cli_run.py::test_shipped_scenario_runs_and_reports": 3,
    "tests/test_cli_run.py::test_bad_scenario_gives_one_line_and_exit_2": 3,
    "tests/test_config.py::test_bad_scenarios_through_the_cli": 3,
    "tests/test_trace_integrity.py::test_a_names_block_of_the_wrong_shape_is_one_line": 3,
    "tests/test_trace_integrity.py::test_an_edited_sidecar_is_one_line": 3,
    "tests/test_special_files.py::test_a_special_file_given_as_an_input_is_refused_at_once": 4,
    "tests/test_conservation.py::test_tcp_bytes_are_conserved": 3,
    "tests/test_model_stack.py::test_identity_invariant_critical_path_equals_elapsed_time": 3,
    "tests/test_output_reliability.py::test_a_full_disk_keeps_the_old_file_and_is_one_line": 3,
    "tests/test_predict.py::test_every_timed_state_is_in_the_table": 3,
}


def _family(item: pytest.Item) -> str:
    return item.nodeid.split("[", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before -m deselects what is marked slow here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not quick_run(config):
        return
    seen: dict[str, int] = {}
    for item in items:
        cap_examples(getattr(item, "obj", None))
        family = _family(item)
        if family in QUICK_STRIDE:
            index = seen[family] = seen.get(family, -1) + 1
            if index % QUICK_STRIDE[family]:
                item.add_marker(pytest.mark.slow)


def dies_with_this_run() -> None:
    """For ``Popen(preexec_fn=...)``: the process gets SIGKILL when the test run that
    started it ends, however it ends (a test's ``finally`` does not run when the run
    itself is killed), and has at most :data:`CHILD_CPU_S` of CPU time.  For a child
    that would otherwise run for hours (a 1000 TB transfer stopped by a signal)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    resource.setrlimit(resource.RLIMIT_CPU, (CHILD_CPU_S, CHILD_CPU_S))


@contextmanager
def sigint_as_on_a_terminal() -> Iterator[None]:
    """Processes started inside get SIGINT at its default, as a terminal's foreground
    job has, also where this run ignores it (a suite started in the background, which
    the processes would inherit: exec resets a handled signal, not an ignored one)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
