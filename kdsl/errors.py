"""The errors kdsl raises at compile time, located at the user's source."""

from __future__ import annotations

from kdsl.ir.location import SourceLocation


class CompileError(SyntaxError):
    """A kernel could not be compiled: names the construct, file, line and column."""

    def __init__(self, message: str, location: SourceLocation | None = None) -> None:
        self.message = message
        self.location = location
        if location is not None and location.line > 0:
            text = location.source_line()
            super().__init__(message, (location.file, location.line, location.column + 1, text))
        else:
            super().__init__(message)

    def __str__(self) -> str:
        loc = self.location
        if loc is None or loc.line <= 0:
            return self.message
        where = f'File "{loc.file}", line {loc.line}, column {loc.column + 1}'
        if loc.function:
            where += f", in {loc.function}"
        text = loc.source_line()
        if not text:
            return f"{self.message}\n  {where}"
        stripped = text.lstrip()
        caret_col = max(0, loc.column - (len(text) - len(stripped)))
        return f"{self.message}\n  {where}\n    {stripped}\n    {' ' * caret_col}^"


class LiteralOverflowError(CompileError, OverflowError):
    """A Python int literal out of the range of the integer type it is combined with:
    NumPy 2 raises ``OverflowError`` (``np.uint8(5) + 300``); kdsl finds it while
    compiling, so it is also a located ``CompileError``."""
