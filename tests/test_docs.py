"""The front door and the docs site's sources: README.md stays a short page whose links all lead somewhere,
and the reference pages under docs/ stay readable. (The site itself is built with ``mkdocs build --strict``
by ``make docs``, which ``make test`` runs: it fails on a broken link or anchor inside docs/ and on a page
left out of mkdocs.yml's nav.)"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_the_readme_is_under_150_lines_and_gives_both_setup_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 150
    assert "make demo" in text and "make test" in text and "pip install pytest-benchaudit" in text


def test_every_relative_link_of_the_readme_names_a_file_or_folder_that_exists() -> None:
    links = [target for target in LINK.findall(README.read_text(encoding="utf-8")) if "://" not in target]
    assert links, "README.md links into docs/"
    missing = [t for t in links if not (REPO / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_every_docs_page_is_in_the_nav_of_mkdocs_yml() -> None:
    # mkdocs --strict says the same; this also holds where make test's docs step did not run.
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    listed = set(re.findall(r"([\w.-]+\.md)\s*$", nav, flags=re.M))
    pages = {p.name for p in (REPO / "docs").glob("*.md")}
    assert pages - listed == set(), "pages left out of the nav"
    assert listed - pages == set(), "nav entries without a page"


def test_no_line_of_the_docs_runs_past_600_characters() -> None:
    # The old README's options table had rows of 1,147 characters; a reference row is split instead.
    long = [
        (p.name, n)
        for p in sorted((REPO / "docs").glob("*.md"))
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > 600
    ]
    assert long == []
