"""The README and the manual in docs/: the front page stays short, every link lands,
every page is in the index, and every figure block is one scripts/figures owns."""

from __future__ import annotations

import functools
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@functools.cache
def _figures():
    spec = importlib.util.spec_from_file_location("figures", ROOT / "scripts" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["figures"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.S | re.M)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_the_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_lands(page):
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        assert dest.exists(), f"{page.name}: {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name}: {target}"


def test_every_page_is_in_the_index():
    index = (DOCS / "README.md").read_text()
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in LINK.findall(index)}
    for page in DOCS.rglob("*.md"):
        if page.name != "README.md" or page.parent != DOCS:
            assert page.resolve() in linked or page.parent.resolve() in linked, page
    assert (DOCS / "tutorial" / "README.md").resolve() in linked


def test_every_figure_shown_is_one_the_script_writes():
    f = _figures()
    figures = (DOCS / "figures.md").read_text()
    written = re.findall(r"^## ([a-z0-9-]+)$", figures, flags=re.M)
    assert written == [name for names in f.GROUPS.values() for name in names]
    shown = {m.group(1) for p in PAGES for m in f.MARKER.finditer(p.read_text())}
    assert shown and shown <= set(written), shown - set(written)
    assert f.bad_markers() == []


def test_a_stale_copy_is_named_and_rewritten_and_an_unknown_name_refused():
    f = _figures()
    figure = f.Figure("x", "held out", "why", "```console\n$ cpasim run\nnew\n```")
    page = ROOT / "README.md"
    old = "a\n<!-- figure: x -->\n```console\n$ cpasim run\nold\n```\n<!-- end figure -->\nb\n"
    new, stale = f.synced(old, {"x": figure}, page)
    assert stale == ["x"]
    assert "new" in new and "old" not in new and new.startswith("a\n") and new.endswith("b\n")
    assert f.synced(new, {"x": figure}, page) == (new, [])
    inline = f.Figure("y", "closed form", "why", "3.0%", inline=True)
    text = "is <!-- figure: y -->2%<!-- end figure --> low"
    want = "is <!-- figure: y -->3.0%<!-- end figure --> low"
    assert f.synced(text, {"y": inline}, page)[0] == want
    # An inline figure opening a line would be raw HTML to Markdown; a block's marker
    # stands alone on its line.
    assert f.OPENS_LINE.search("a\n<!-- figure: y -->3.0%<!-- end figure --> b")
    assert not f.OPENS_LINE.search(old) and not f.OPENS_LINE.search(want)
    with pytest.raises(LookupError, match="no figure named 'z'"):
        f.synced("<!-- figure: z --><!-- end figure -->", {}, page)
