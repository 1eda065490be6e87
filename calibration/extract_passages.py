"""Copy, from the seed texts, the passages that the figures in seeds/*.csv quote.

    python calibration/extract_passages.py SEED_DIR

For every figure, the smallest run of consecutive lines of its seed that contains the
quote, and the run that contains its section's title, are copied verbatim into
``seeds/passages/<seed>``, each run headed by its line numbers in the seed and the seed's
SHA-256. The test suite checks the figures against these passages, so it needs nothing
outside the repository; re-run this when a figure is added.
"""

from __future__ import annotations

import bisect
import hashlib
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from cpasim.calibrate.reference import (  # noqa: E402
    PASSAGE_BREAK,
    normalize_text,
    read_reference,
    section_title,
)


def _line_run(lines: list[str], needle: str) -> tuple[int, int]:
    """The [first, last] run of lines whose joined text holds ``needle``'s first occurrence."""
    starts, text = [], ""
    for line in lines:
        starts.append(len(text))
        text += normalize_text(line) + " "
    at = text.find(needle)
    if at < 0:
        raise SystemExit(f"{needle!r} is not in the seed")
    first = bisect.bisect_right(starts, at) - 1
    last = bisect.bisect_right(starts, at + len(needle) - 1) - 1
    return first, last


def main(seed_dir: Path) -> None:
    figures = [f for t in sorted((HERE / "seeds").glob("*.csv")) for f in read_reference(t)]
    out_dir = HERE / "seeds" / "passages"
    out_dir.mkdir(exist_ok=True)
    for seed in sorted({f.seed for f in figures}):
        raw = (seed_dir / seed).read_bytes()
        lines = raw.decode().splitlines()
        runs = set()
        for fig in (f for f in figures if f.seed == seed):
            runs.add(_line_run(lines, normalize_text(fig.quote)))
            runs.add(_line_run(lines, normalize_text(section_title(fig.section))))
        merged: list[list[int]] = []
        for first, last in sorted(runs):
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
            else:
                merged.append([first, last])
        parts = [
            f"# Passages of {seed} quoted by calibration/seeds/*.csv, copied verbatim.\n"
            f"# Whole text: sha256 {hashlib.sha256(raw).hexdigest()}, {len(lines)} lines.\n"
            "# Written by calibration/extract_passages.py; each passage is headed by its lines.\n"
        ]
        for first, last in merged:
            parts.append(
                f"{PASSAGE_BREAK} lines {first + 1}-{last + 1}\n"
                + "\n".join(lines[first : last + 1])
                + "\n"
            )
        (out_dir / seed).write_text("".join(parts))
        print(f"{seed}: {len(merged)} passages, {sum(b - a + 1 for a, b in merged)} lines")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        print("extract_passages: expected one argument, the seeds' directory", file=sys.stderr)
        raise SystemExit(2)
    main(Path(sys.argv[1]))
