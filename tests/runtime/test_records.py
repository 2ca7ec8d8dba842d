"""kdsl.records.dataclass behaves as dataclasses.dataclass for the classes kdsl declares."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
import sys
from typing import Any, ClassVar

import pytest

from kdsl import records

FLAGS = [{}, {"frozen": True}, {"eq": False}, {"frozen": True, "eq": False}]


def declare(decorator: Any, flags: dict) -> type:
    @decorator(**flags)
    class Point:
        """A point."""

        x: int
        y: Any
        label: str = "p"
        tags: list = dataclasses.field(default_factory=list)
        extra: dict = dataclasses.field(default_factory=dict, compare=False)
        shared: ClassVar[int] = 7

    return Point


def pair(flags: dict) -> tuple[type, type]:
    return declare(dataclasses.dataclass, flags), declare(records.dataclass, flags)


@pytest.mark.parametrize("flags", FLAGS)
def test_fields_init_repr_and_replace_match_the_standard_ones(flags: dict) -> None:
    standard, fast = pair(flags)
    assert [f.name for f in dataclasses.fields(fast)] == [f.name for f in dataclasses.fields(standard)]
    assert fast.__match_args__ == standard.__match_args__
    assert str(inspect.signature(fast)) == str(inspect.signature(standard))
    for cls in (standard, fast):
        assert dataclasses.is_dataclass(cls)
    a, b = standard(1, [2.5]), fast(1, [2.5])
    assert repr(b).replace("declare.<locals>.", "") == repr(a).replace("declare.<locals>.", "")
    assert dataclasses.asdict(b) == dataclasses.asdict(a)
    assert b.tags == [] and b.tags is not fast(3, 4).tags  # a fresh list each
    moved = dataclasses.replace(b, x=5, label="q")
    assert (moved.x, moved.y, moved.label) == (5, [2.5], "q") and type(moved) is fast
    assert fast.shared == 7 and "shared" not in fast.__match_args__
    with pytest.raises(TypeError):
        fast()
    with pytest.raises(TypeError):
        fast(1, 2, 3, [], {}, 6)


@pytest.mark.parametrize("flags", FLAGS)
def test_equality_hashing_and_freezing_match_the_standard_ones(flags: dict) -> None:
    standard, fast = pair(flags)
    for cls in (standard, fast):
        one, same, other = cls(1, 2.0), cls(1, 2.0, extra={"ignored": 1}), cls(1, 3.0)
        eq = flags.get("eq", True)
        assert (one == same) is eq and (one == other) is False and one != "text"
        nan = math.nan  # the same NaN object: equal in a tuple (up to Python 3.12)
        assert (cls(1, nan) == cls(1, nan)) is (eq and sys.version_info < (3, 13))
    hashable = [cls for cls in (standard, fast) if cls.__hash__ is not None]
    assert len(hashable) in (0, 2)
    if flags.get("frozen") and flags.get("eq", True):
        assert hash(fast(1, "a", "b", ())) == hash(standard(1, "a", "b", ()))
        assert hash(fast(1, "a", tags=())) == hash(fast(1, "a", tags=(), extra={"x": 1}))
    point = fast(1, 2)
    if flags.get("frozen"):
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
            point.x = 3
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
            del point.y
    else:
        point.x = 3
        assert point.x == 3
    assert copy.deepcopy(point) == point or not flags.get("eq", True)


@records.dataclass(frozen=True)
class Pickled:
    name: str
    items: tuple = ()


def test_frozen_instances_pickle_and_copy() -> None:
    value = Pickled("a", (1, 2))
    assert pickle.loads(pickle.dumps(value)) == value
    assert copy.copy(value) == value and hash(copy.copy(value)) == hash(value)


def test_methods_a_class_defines_are_kept() -> None:
    @records.dataclass(frozen=True)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __hash__(self) -> int:
            return 42

    assert repr(Named("n")) == "<n>" and hash(Named("n")) == 42
    assert Named("n") == Named("n")

    @records.dataclass
    class Mutable:
        value: int

    assert Mutable.__hash__ is None  # eq without frozen: unhashable, as the standard one


def test_a_class_without_a_docstring_gets_the_standard_one() -> None:
    @records.dataclass
    class Bare:
        a: int
        b: str = "x"

    @dataclasses.dataclass
    class Standard:
        a: int
        b: str = "x"

    assert Bare.__doc__ == Standard.__doc__.replace("Standard", "Bare")


def test_what_it_does_not_handle_goes_to_the_standard_decorator() -> None:
    @records.dataclass
    class Later:
        a: int
        b: int = dataclasses.field(init=False, default=0)

        def __post_init__(self) -> None:
            self.b = 2 * self.a

    assert Later(3).b == 6

    @records.dataclass(frozen=True)
    class Base:
        a: int

    @records.dataclass(frozen=True)
    class Derived(Base):
        b: int = 1

    assert Derived(1, 2) == Derived(1, 2) and Derived(1).b == 1


def test_a_field_without_a_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @records.dataclass
        class Wrong:
            a: int = 0
            b: int


@pytest.mark.parametrize("flags", [{}, {"frozen": True}])
def test_comparison_compiles_on_first_use_and_then_matches(flags: dict) -> None:
    standard, record = pair(flags)
    a, b = record(1, [2.0]), record(1, [2.0])
    # instances made, none compared yet: __eq__ (and __hash__) are still stand-ins
    assert isinstance(vars(record)["__eq__"], records._StandIn)
    want_a, want_b = standard(1, [2.0]), standard(1, [2.0])
    assert (a == b) == (want_a == want_b) and (a != record(2, [2.0]))
    assert not isinstance(vars(record)["__eq__"], records._StandIn)
    if flags.get("frozen"):
        frozen_a, frozen_b = record(1, (2.0,), "p", ()), record(1, (2.0,), "p", ())
        assert hash(frozen_a) == hash(frozen_b) == hash(standard(1, (2.0,), "p", ()))
    else:
        assert record.__hash__ is None
