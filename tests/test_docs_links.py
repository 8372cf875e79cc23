"""Every relative markdown link in the README, docs/ and the experiments' index resolves to a
file or folder of the checkout (a moved record or a renamed page breaks no link)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "experiments" / "README.md"]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def relative_links(text: str) -> list[str]:
    """The link targets of a page outside its fenced code blocks, less web addresses and
    in-page anchors, each without its #fragment."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    targets = [m.group(1) for m in LINK.finditer(prose)]
    return [t.split("#")[0] for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def broken(page: Path) -> list[str]:
    return [t for t in relative_links(page.read_text()) if not (page.parent / t).exists()]


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page):
    assert broken(page) == [], f"{page.relative_to(ROOT)}: links to nothing"


def test_the_checker_sees_a_broken_link_and_spares_code_web_and_anchors(tmp_path):
    (tmp_path / "there.md").write_text("")
    page = tmp_path / "page.md"
    page.write_text("[a](there.md#x) [b](gone.md) ![c](gone.png) [d](https://x.org/y) [e](#top)\n"
                    "```bash\n[f](in-code.md)\n```\n")
    assert broken(page) == ["gone.md", "gone.png"]
