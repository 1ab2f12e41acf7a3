"""The README and docs/: every relative link names a file that exists, every #anchor a heading there.

A newcomer follows README.md into docs/; a link that a move of text left behind would strand them.
Anchors are GitHub's: a heading's text in lower case, punctuation but hyphens dropped, spaces made
hyphens (a repeat gets -1, -2, ...), or an explicit `<a id="...">`.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# [text](target) and [text]: target, outside code spans and fenced or indented code.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)|^\s{0,3}\[[^\]]+\]:\s*(\S+)", re.M)
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def prose(text: str) -> str:
    """The text without code: fenced blocks, indented blocks (after a blank line) and code spans."""
    out, fenced, code, blank = [], False, False, True
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
        elif fenced or (line.startswith("    ") and (blank or code)):
            code = not fenced
            blank = False
            out.append("")
        elif not line.strip():
            blank = True
            out.append(line)
        else:
            code = blank = False
            out.append(re.sub(r"`[^`\n]*`", "", line))
    return "\n".join(out)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, only word characters, hyphens and spaces, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a link may name in `page`."""
    found, seen = set(), {}
    text = prose_keep_headings(page.read_text())
    for line in text.split("\n"):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    found.update(EXPLICIT.findall(page.read_text()))
    return found


def prose_keep_headings(text: str) -> str:
    """The lines that can be headings: outside fenced blocks."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        out.append("" if fenced else line)
    return "\n".join(out)


def links(page: Path) -> list[str]:
    return [a or b for a, b in LINK.findall(prose(page.read_text()))]


def test_there_are_pages_and_links_to_check():
    if not (REPO / "docs").is_dir():
        pytest.skip("docs/ is not beside the tests (the package build copies the tests alone)")
    assert len(PAGES) >= 8
    assert sum(len(links(p)) for p in PAGES) >= 30


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves_to_a_file_and_a_heading(page):
    if not page.exists():
        pytest.skip(f"{page.relative_to(REPO)} is not beside the tests (the package build copies the tests alone)")
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: not ours to check
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / unquote(path)).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest}")
            continue
        if anchor and (dest.is_dir() or dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, "\n".join(broken)


def test_the_readme_leads_in_at_most_300_lines():
    readme = REPO / "README.md"
    if not readme.exists():
        pytest.skip("README.md is not beside the tests (the package build copies the tests alone)")
    lines = len(readme.read_text().splitlines())
    assert lines <= 300, f"README.md has {lines} lines"


def test_every_page_in_docs_is_linked_from_the_index():
    index = REPO / "docs" / "README.md"
    if not index.exists():
        pytest.skip("docs/ is not beside the tests (the package build copies the tests alone)")
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in links(index)}
    missing = [p.name for p in PAGES[1:] if p != index and p.resolve() not in linked]
    assert not missing, missing
