"""Source locations carried by every IR operation."""

from __future__ import annotations

import linecache

from kdsl.records import dataclass


@dataclass(frozen=True)
class SourceLocation:
    """A position in the user's Python source: file, 1-based line, 0-based column."""

    file: str
    line: int
    column: int = 0
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column + 1}"

    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")


UNKNOWN_LOCATION = SourceLocation("<unknown>", 0, 0)
