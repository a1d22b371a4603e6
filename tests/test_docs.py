"""The README is a front page that points into the docs site (issue "The house, second step"):
at most 250 lines, and every relative link in it names a file of the repository (the site's own
links and anchors are checked by ``mkdocs build --strict`` in ``make lint``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def test_the_readme_is_a_front_page() -> None:
    assert len(README.read_text().splitlines()) <= 250


def test_every_relative_link_of_the_readme_names_a_file() -> None:
    text = re.sub(r"```.*?```", "", README.read_text(), flags=re.S)  # code blocks hold no links
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", text) if not t.startswith(("http://", "https://", "#"))]
    assert targets, "the README links into docs/"
    missing = [t for t in targets if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_every_docs_page_is_in_the_site_navigation() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    docs = ROOT / "docs"
    pages = sorted(str(p.relative_to(docs)) for p in docs.rglob("*.md") if p.parent.name != "screenshots")
    assert [p for p in pages if f": {p}" not in nav] == []
