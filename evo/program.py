"""A program file and its EVOLVE block: the part of the file the policy may change.

The block is delimited by two marker lines, `EVOLVE-BLOCK-START` and `EVOLVE-BLOCK-END`,
written in any comment syntax (`# EVOLVE-BLOCK-START`, `// EVOLVE-BLOCK-START`, ...): a
line is a marker when it contains the marker text. A file without markers is all block.
"""

from __future__ import annotations

from dataclasses import dataclass

START = "EVOLVE-BLOCK-START"
END = "EVOLVE-BLOCK-END"


class MarkerError(ValueError):
    """The markers are unbalanced, nested or out of order."""


@dataclass(frozen=True)
class EvolveFile:
    """A file split as `head + start_line + block + end_line + tail` (concatenation is exact).

    Without markers, `head`, `start_line`, `end_line` and `tail` are empty.
    """

    head: str
    start_line: str
    block: str
    end_line: str
    tail: str

    @property
    def text(self) -> str:
        return self.head + self.start_line + self.block + self.end_line + self.tail

    @property
    def has_markers(self) -> bool:
        return bool(self.start_line)

    def with_block(self, block: str) -> "EvolveFile":
        """The same file with a new block (a newline is added before the end marker if missing)."""
        if self.has_markers and block and not block.endswith("\n"):
            block += "\n"
        return EvolveFile(self.head, self.start_line, block, self.end_line, self.tail)


def split(text: str) -> EvolveFile:
    """Split a file at its EVOLVE markers; raise MarkerError when they are malformed."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if START in line]
    ends = [i for i, line in enumerate(lines) if END in line]
    if not starts and not ends:
        return EvolveFile("", "", text, "", "")
    if len(starts) != 1 or len(ends) != 1:
        raise MarkerError(
            f"expected one {START} line and one {END} line, found {len(starts)} and {len(ends)}"
        )
    start, end = starts[0], ends[0]
    if end < start:
        raise MarkerError(f"{END} (line {end + 1}) comes before {START} (line {start + 1})")
    start_line = lines[start] if lines[start].endswith("\n") else lines[start] + "\n"
    return EvolveFile(
        head="".join(lines[:start]),
        start_line=start_line,
        block="".join(lines[start + 1 : end]),
        end_line=lines[end],
        tail="".join(lines[end + 1 :]),
    )


def splice(text: str, block: str) -> str:
    """`text` with its EVOLVE block replaced by `block`."""
    return split(text).with_block(block).text
