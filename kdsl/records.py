"""``dataclass``: the standard library's, made at a third of its cost.

The standard ``dataclasses.dataclass`` compiles the source of every method it adds
(``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, and a frozen class's
``__setattr__`` and ``__delattr__``): about 0.35 ms a class on CPython 3.11, and kdsl
defines some fifty, about 18 ms of ``import kdsl`` and of the first compile. Here the
standard decorator processes the fields (so ``dataclasses.fields``, ``replace``,
``asdict`` and ``__match_args__`` work as before), ``__init__`` is compiled from source
when the class is first instantiated and ``__eq__`` and ``__hash__`` when an instance is
first compared or hashed (their speed and ``__init__``'s signature matter), and the other
methods are closures over the fields' names, with the standard ones' behaviour.

Only what kdsl uses is handled here (``frozen``, ``eq``, defaults and default
factories); a class with anything else (``__post_init__``, ``InitVar``, keyword-only or
non-``init`` fields, a dataclass base) is made by the standard decorator.
"""

from __future__ import annotations

import dataclasses
import reprlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any


class _Factory:
    """The default of a parameter whose field has a default factory."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _make(cls: type, frozen: bool, eq: bool) -> type:
    own = cls.__dict__
    class_hash = own.get("__hash__", dataclasses.MISSING)
    explicit_hash = not (class_hash is dataclasses.MISSING
                         or (class_hash is None and "__eq__" in own))
    has_doc = cls.__doc__ is not None
    doc = None
    if not has_doc:  # the standard decorator's text, made when read (see _SignatureDoc)
        cls.__doc__ = doc = _SignatureDoc()  # type: ignore[assignment]
    dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False)
    fields = list(dataclasses.fields(cls))
    names = tuple(f.name for f in fields)
    compared = hashed = None
    if eq:
        compared = tuple(f.name for f in fields if f.compare)
        if frozen and not explicit_hash:
            hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    _check_default_order(fields)
    methods = _CompiledMethods(cls, fields, frozen, compared, hashed)
    _add(cls, "__init__", methods.stand_in("__init__"))
    _add(cls, "__repr__", _repr_function(names))
    if compared is not None:
        _add(cls, "__eq__", methods.stand_in("__eq__"))
        if hashed is not None:
            cls.__hash__ = methods.stand_in("__hash__")  # type: ignore[method-assign,assignment]
        elif not explicit_hash:  # eq without frozen: unhashable, as with the standard one
            cls.__hash__ = None  # type: ignore[assignment]
    if frozen:
        _add(cls, "__setattr__", _frozen_setattr(cls, names))
        _add(cls, "__delattr__", _frozen_delattr(cls, names))
    params = getattr(cls, "__dataclass_params__", None)
    for name, value in (("init", True), ("repr", True), ("eq", eq), ("frozen", frozen)):
        if params is not None and hasattr(params, name):
            setattr(params, name, value)
    if doc is not None:
        doc.ready = True
    return cls


class _SignatureDoc:
    """The docstring the standard decorator gives a class that has none (its name and
    signature), made when it is first read: ``inspect.signature`` costs as much as the
    rest of the class. Until the class is made (the standard decorator reads it), its
    name."""

    def __init__(self) -> None:
        self.ready = False

    def __get__(self, obj: Any, owner: type) -> str:
        if not self.ready:
            return owner.__name__
        import inspect

        try:
            signature = str(inspect.signature(owner)).replace(" -> None", "")
        except (TypeError, ValueError):
            signature = ""
        return owner.__name__ + signature


def _standard_only(cls: type, frozen: bool) -> bool:
    """Whether ``cls`` needs what only the standard decorator does."""
    if any(dataclasses.is_dataclass(base) for base in cls.__mro__[1:]):
        return True
    if "__post_init__" in cls.__dict__ or (frozen and ("__setattr__" in cls.__dict__
                                                       or "__delattr__" in cls.__dict__)):
        return True
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else repr(annotation)
        if "InitVar" in text or "KW_ONLY" in text:
            return True
        value = cls.__dict__.get(name)
        if isinstance(value, dataclasses.Field) and (not value.init or value.kw_only is True):
            return True
    return False


def _add(cls: type, name: str, method: Any) -> None:
    if name in cls.__dict__:  # the class's own method stays, as with the standard decorator
        return
    if callable(method):
        method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    setattr(cls, name, method)


def _check_default_order(fields: list[dataclasses.Field]) -> None:
    seen_default = False
    for f in fields:
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


class _CompiledMethods:
    """A class's ``__init__``, and its ``__eq__`` and ``__hash__``, compiled from source
    when first used (most classes of a process that compiles nothing, and many of one
    that does, are never instantiated, and most instances are never compared or hashed:
    a compile of source costs about as much as the rest of the class). Until then the
    class holds a ``_StandIn`` for each."""

    def __init__(self, cls: type, fields: list[dataclasses.Field], frozen: bool,
                 compared: tuple[str, ...] | None, hashed: tuple[str, ...] | None) -> None:
        self.cls = cls
        self.arguments = (fields, frozen, compared, hashed)
        self.functions: dict[str, Callable[..., Any]] = {}

    def stand_in(self, name: str) -> _StandIn:
        return _StandIn(self, name)

    def compiled(self, name: str) -> Callable[..., Any]:
        """The compiled method ``name`` (``__init__`` alone, or ``__eq__`` with
        ``__hash__``), put in place of the stand-ins the class still holds."""
        function = self.functions.get(name)
        if function is None:
            fields, frozen, compared, hashed = self.arguments
            made = _compiled_methods(fields, frozen, compared, hashed,
                                     comparison=name != "__init__")
            cls = self.cls
            for made_name, made_function in made.items():
                made_function.__qualname__ = f"{cls.__qualname__}.{made_name}"
                held = cls.__dict__.get(made_name)
                if isinstance(held, _StandIn) and held.methods is self:
                    setattr(cls, made_name, made_function)
            self.functions.update(made)
            function = made[name]
        return function


class _StandIn:
    """A class attribute standing for a compiled method (see ``_CompiledMethods``): read
    from the class or an instance (as Python does to call ``__init__``, ``__eq__`` and
    ``__hash__``), it compiles the methods and gives the real one, bound as a function
    would be."""

    __slots__ = ("methods", "name")

    def __init__(self, methods: _CompiledMethods, name: str) -> None:
        self.methods = methods
        self.name = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self.methods.compiled(self.name).__get__(obj, owner)


def _compiled_methods(fields: list[dataclasses.Field], frozen: bool, compared: tuple[str, ...] | None,
                      hashed: tuple[str, ...] | None,
                      comparison: bool = False) -> dict[str, Callable[..., Any]]:
    """``__init__``, or (with ``comparison``) ``__eq__`` and ``__hash__`` over the fields
    named (where not None), compiled from source: they run as fast as the standard ones."""
    if comparison:
        return _compiled_comparison(compared, hashed)
    params: list[str] = []
    lines: list[str] = []
    values: dict[str, Any] = {"__kdsl_factory": _FACTORY, "__kdsl_object": object}
    seen_default = False
    for f in fields:
        if f.default is not dataclasses.MISSING:
            values[f"__kdsl_default_{f.name}"] = f.default
            params.append(f"{f.name}=__kdsl_default_{f.name}")
            value = f.name
        elif f.default_factory is not dataclasses.MISSING:
            values[f"__kdsl_make_{f.name}"] = f.default_factory
            params.append(f"{f.name}=__kdsl_factory")
            value = f"__kdsl_make_{f.name}() if {f.name} is __kdsl_factory else {f.name}"
        else:
            if seen_default:
                raise TypeError(f"non-default argument {f.name!r} follows default argument")
            params.append(f.name)
            value = f.name
        seen_default = seen_default or f.default is not dataclasses.MISSING \
            or f.default_factory is not dataclasses.MISSING
        lines.append(f"__kdsl_object.__setattr__(self, {f.name!r}, {value})" if frozen
                     else f"self.{f.name} = {value}")
    body = "\n".join(f"        {line}" for line in lines or ["pass"])
    source = [f"def __kdsl_make({', '.join(values)}):",
              f"    def __init__(self{''.join(', ' + p for p in params)}):", body,
              "    return __init__"]
    namespace: dict[str, Any] = {}
    exec("\n".join(source) + "\n", {}, namespace)
    init = namespace["__kdsl_make"](*values.values())
    init.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return {"__init__": init}


def _compiled_comparison(compared: tuple[str, ...] | None,
                         hashed: tuple[str, ...] | None) -> dict[str, Callable[..., Any]]:
    source: list[str] = []
    made: list[str] = []
    if compared is not None:  # as the standard __eq__ of this Python compares
        if sys.version_info >= (3, 13):  # field by field (NaN unequal to itself)
            test = " and ".join(f"self.{f} == other.{f}" for f in compared) or "True"
            source += ["def __eq__(self, other):", "    if self is other:",
                       "        return True"]
        else:  # as tuples (the same NaN object equal to itself)
            test = f"{_tuple('self', compared)} == {_tuple('other', compared)}"
            source += ["def __eq__(self, other):"]
        source += ["    if other.__class__ is self.__class__:", f"        return {test}",
                   "    return NotImplemented"]
        made.append("__eq__")
    if hashed is not None:
        source += ["def __hash__(self):", f"    return hash({_tuple('self', hashed)})"]
        made.append("__hash__")
    namespace: dict[str, Any] = {}
    exec("\n".join(source) + "\n", {}, namespace)
    return {name: namespace[name] for name in made}


def _tuple(name: str, fields: tuple[str, ...]) -> str:
    return "(" + "".join(f"{name}.{field}," for field in fields) + ")"


def _repr_function(names: tuple[str, ...]) -> Callable[[Any], str]:
    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        parts = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({parts})"

    return __repr__


def _frozen_setattr(cls: type, names: tuple[str, ...]) -> Callable[[Any, str, Any], None]:
    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)  # type: ignore[arg-type]

    return __setattr__


def _frozen_delattr(cls: type, names: tuple[str, ...]) -> Callable[[Any, str], None]:
    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)  # type: ignore[arg-type]

    return __delattr__


if TYPE_CHECKING:  # type checkers see the standard decorator, which this one behaves as
    from dataclasses import dataclass as dataclass
else:
    def dataclass(cls: type | None = None, /, *, frozen: bool = False,
                  eq: bool = True) -> Any:
        """``dataclasses.dataclass`` with ``frozen`` and ``eq`` (see the module's text)."""

        def wrap(c: type) -> type:
            if _standard_only(c, frozen):
                return dataclasses.dataclass(c, frozen=frozen, eq=eq)
            return _make(c, frozen, eq)

        return wrap if cls is None else wrap(cls)
