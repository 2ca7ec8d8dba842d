"""The arguments a kernel takes besides the user's: the arrays it reads from globals and
closures, and the random stream (key and call number) of a kernel that draws numbers."""

from __future__ import annotations

from typing import Any

from kdsl.frontend.captures import ArrayCapture
from kdsl.random_numbers import next_call
from kdsl.records import dataclass

STREAM_NAMES = ("$rng_key0", "$rng_key1", "$rng_call")


@dataclass(frozen=True)
class HiddenArguments:
    """What a kernel's call appends to the user's arguments, in this order."""

    arrays: tuple[ArrayCapture, ...]
    random: bool

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.arrays] + (list(STREAM_NAMES) if self.random else [])

    def __len__(self) -> int:
        return len(self.arrays) + (len(STREAM_NAMES) if self.random else 0)

    def read(self, kernel_name: str, new_call: bool = True) -> list[Any]:
        """The captured arrays now, and the stream of a new call (``new_call``) or zeros
        (to type the arguments without drawing a call number)."""
        values = []
        for c in self.arrays:
            try:
                values.append(c.read())
            except (KeyError, ValueError):
                raise NameError(f"kernel {kernel_name} reads the array '{c.name}' (in "
                                f"{c.owner}), which is no longer defined") from None
        if self.random:
            values.extend(next_call() if new_call else (0, 0, 0))
        return values
