"""Every relative markdown link in the README, docs/ and the experiments' index resolves to a
file or folder of the checkout, and its #anchor (or an in-page #anchor) to a heading of the
page it names (a moved record, a renamed page or a reworded heading breaks no link)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "experiments" / "README.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)", re.MULTILINE)  # [name]: target


def prose(text: str) -> str:
    """The page less its fenced code blocks."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def targets(text: str) -> list[str]:
    """The link targets of a page outside its fenced code blocks (inline and reference-style),
    less web addresses."""
    found = [m.group(1) for m in LINK.finditer(prose(text))] + DEFINITION.findall(prose(text))
    return [t.strip("<>") for t in found if not re.match(r"[a-z]+:", t)]


def relative_links(text: str) -> list[str]:
    """The file part of each link target that names a file (in-page anchors aside)."""
    return [t.split("#")[0] for t in targets(text) if not t.startswith("#")]


def anchors(text: str) -> set[str]:
    """The anchors GitHub makes of a page's headings (lower case, punctuation but - and _
    dropped, spaces to -, a repeated one suffixed -1, -2, ...) and its explicit <a id|name>."""
    seen: dict[str, int] = {}
    made = set()
    for heading in re.findall(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", prose(text), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        made.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return made | set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", text))


def broken(page: Path) -> list[str]:
    """The links of `page` whose file is missing, or whose #anchor names no heading of a page."""
    wrong = []
    for target in targets(page.read_text()):
        path, _, anchor = target.partition("#")
        file = page.parent / path if path else page
        if not file.exists():
            wrong.append(path)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text()):
            wrong.append(target)
    return wrong


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page):
    assert broken(page) == [], f"{page.relative_to(ROOT)}: links to nothing"


def test_the_checker_sees_a_broken_link_and_spares_code_web_and_anchors(tmp_path):
    (tmp_path / "there.md").write_text("# Title\n## Set proposals: m > 1\n## Set proposals: m > 1\n<a id=\"kept\"></a>\n")
    page = tmp_path / "page.md"
    page.write_text("# Top\n[a](there.md#set-proposals-m--1) [b](gone.md) ![c](gone.png) [d](https://x.org/y) [e](#top)\n"
                    "[f](there.md#set-proposals-m--1-1) [g](there.md#kept) [h](there.md#nowhere) [i](#bottom)\n"
                    "[j][ref]\n\n[ref]: gone-too.md\n```bash\n[k](in-code.md)\n# not a heading\n```\n")
    assert broken(page) == ["gone.md", "gone.png", "there.md#nowhere", "#bottom", "gone-too.md"]
    assert relative_links(page.read_text()) == ["there.md", "gone.md", "gone.png", "there.md", "there.md", "there.md",
                                                "gone-too.md"]
