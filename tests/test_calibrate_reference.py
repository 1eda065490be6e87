"""The seed figures in calibration/seeds/ are checked against the seed texts themselves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpasim.calibrate.reference import (
    PASSAGES_DIR,
    normalize_text,
    read_passages,
    read_reference,
    section_title,
)
from cpasim.errors import CpasimError

ROOT = Path(__file__).parent.parent
TABLES = sorted((ROOT / "calibration" / "seeds").glob("*.csv"))
ROWS = [(t.name, i, fig) for t in TABLES for i, fig in enumerate(read_reference(t))]


def test_every_seed_has_a_table():
    assert {t.name for t in TABLES} >= {
        "dp_logp.csv",
        "saidi_ch6.csv",
        "mosberger_latency.csv",
        "makineni_hz_per_bit.csv",
        "waheed_bounds.csv",
    }
    assert len(ROWS) > 100


@pytest.mark.parametrize(("table", "row", "fig"), ROWS, ids=[f"{t}:{i}" for t, i, _ in ROWS])
def test_figure_is_quoted_from_its_seed(table, row, fig):
    # The seed's passages are kept verbatim in the repository; a quote lies in one of them.
    passages = read_passages(fig.seed)
    assert any(normalize_text(fig.quote) in p for p in passages), f"quote not in {fig.seed}"
    # The value appears in the quote as a number (not as part of a longer one).
    numbers = [float(n) for n in re.findall(r"(?<![\d.])\d+(?:\.\d+)?", fig.quote)]
    assert fig.value in numbers
    # The section named exists in the seed (its leading title words).
    title = normalize_text(section_title(fig.section))
    assert any(title in p for p in passages), f"section {fig.section!r} not in {fig.seed}"


def test_every_seed_has_its_passages():
    assert {p.name for p in PASSAGES_DIR.iterdir()} == {fig.seed for _, _, fig in ROWS}


def test_a_quote_cannot_span_two_passages(tmp_path):
    (tmp_path / "s.txt").write_text("# header\n@@ lines 1-1\nalpha beta\n@@ lines 9-9\ngamma\n")
    passages = read_passages("s.txt", tmp_path)
    assert passages == ["alpha beta", "gamma"]
    assert not any("beta gamma" in p for p in passages)


def test_units_convert():
    dp = {(f.quantity, f.system): f for f in read_reference(ROOT / "calibration/seeds/dp_logp.csv")}
    assert dp[("gs", "GEDP")].cpasim_value == pytest.approx(18_760.0)  # ns
    assert dp[("bandwidth_raw_max", "FEDP")].cpasim_value == pytest.approx(97.6e6)  # bit/s


def test_bad_reference_table(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("quantity,value\nx,1\n")
    with pytest.raises(CpasimError, match="missing column"):
        read_reference(path)
