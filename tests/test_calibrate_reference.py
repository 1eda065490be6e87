"""The seed figures in calibration/seeds/ are checked against the seed texts themselves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpasim.calibrate.reference import read_reference
from cpasim.errors import CpasimError

ROOT = Path(__file__).parent.parent
TABLES = sorted((ROOT / "calibration" / "seeds").glob("*.csv"))
# The seed texts live in the project's shared/ folder, beside the repository.
SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
ROWS = [(t.name, i, fig) for t in TABLES for i, fig in enumerate(read_reference(t))]


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


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
    text = _norm((SEEDS / fig.seed).read_text())
    assert _norm(fig.quote) in text, f"quote not found in {fig.seed}"
    # The value appears in the quote as a number (not as part of a longer one).
    numbers = [float(n) for n in re.findall(r"(?<![\d.])\d+(?:\.\d+)?", fig.quote)]
    assert fig.value in numbers
    # The section named exists in the seed (its leading title words).
    title = re.sub(r"^(slide \d+ |Section )", "", fig.section).split(" (")[0]
    assert _norm(title) in text, f"section {fig.section!r} not found in {fig.seed}"


def test_units_convert():
    dp = {(f.quantity, f.system): f for f in read_reference(ROOT / "calibration/seeds/dp_logp.csv")}
    assert dp[("gs", "GEDP")].cpasim_value == pytest.approx(18_760.0)  # ns
    assert dp[("bandwidth_raw_max", "FEDP")].cpasim_value == pytest.approx(97.6e6)  # bit/s


def test_bad_reference_table(tmp_path):
    path = tmp_path / "r.csv"
    path.write_text("quantity,value\nx,1\n")
    with pytest.raises(CpasimError, match="missing column"):
        read_reference(path)
