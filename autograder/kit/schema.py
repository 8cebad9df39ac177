"""The shapes of what a student's process may send, checked before any trusted code reads it.

A rank's student process can write any frame to its trusted process
(`sandbox.gloo.ranks`): it finds its `Proxy` and sends what it likes. So every
message is checked against the schema of its kind before it is used: the
frame kinds next to the code they feed (`ranks.trusted`, `ranks.p2p`), each
scenario's phases, marks and result next to the scenario (`scenarios`). A
value that does not fit raises `Malformed`, one line naming the first field
that does not fit, which the trusted process reports as the student's
process's doing ("the student's process sent a malformed phase mark: name
is '0', not one of ...").

Values are what `json.loads` makes (dict, list, str, int, float, bool,
None), nested at most `MAX_DEPTH` levels (`nesting_depth`, which the channel
checks on every header before any schema runs, so these checks may recurse).
Pure Python: the starter kit ships this module.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

MAX_DEPTH = 32            # a result's state is {"result": {"state": {name: 8-d nested lists}}}; plain() allows 20
MAX_SHAPE_DIMS = 64
MAX_LAYOUT_ELEMENTS = 1 << 62       # torch's strides are int64: the product of a shape's sizes stays below this
SHOWN_CHARS = 40


# exact types of the scalars json.loads makes (a subclass of list or dict is not one of them)
JSON_SCALARS = frozenset({type(None), bool, int, float, str})
_NUMBERS = frozenset({int, float})


class Malformed(ValueError):
    """A message from a student's process that does not fit its schema (one line)."""


class Unfit(Malformed):
    """`value` at `path` is not `wanted`: its line is put together only when read, since
    `OneOf` tries options that fail on most values (a gradient checked against null first)."""

    def __init__(self, value: Any, path: "str | _Path", wanted: str):
        super().__init__()
        self.value, self.path, self.wanted = value, path, wanted

    def __str__(self) -> str:
        return f"{self.path or 'the message'} is {shown(self.value)}, not {self.wanted}"

    def __reduce__(self):                   # pickled (the kit's local ranks) as the plain line it reads as
        return Malformed, (str(self),)


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """Levels of lists and dicts in `value` (a scalar is 0), counted without
    recursion; stops counting once past `limit` (returns limit + 1)."""
    if not isinstance(value, (list, dict)):
        return 0
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()          # a list or dict at level `depth`
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        items = item.values() if isinstance(item, dict) else item
        # only containers go on the stack: a tensor's values are thousands of scalars, and a row
        # of them is passed over by the types it holds (counted in C), not looked at one by one
        if not set(map(type, items)) <= JSON_SCALARS:
            stack.extend((v, depth + 1) for v in items if isinstance(v, (list, dict)))
    return deepest


def shown(value: Any) -> str:
    """A short, one-line picture of an untrusted value for an error line."""
    if isinstance(value, dict):
        return f"an object of {len(value)} fields"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value[:SHOWN_CHARS + 1] if isinstance(value, str) else value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


class _Path:
    """Where a value lies in a message, as `_at` names it: put together only when an error line
    needs it (checking a tensor's values would otherwise format a name for each one)."""

    __slots__ = ("parent", "key")

    def __init__(self, parent: "str | _Path", key: Any):
        self.parent, self.key = parent, key

    def __str__(self) -> str:
        return f"{self.parent}[{shown(self.key)}]" if self.parent else str(self.key)[:SHOWN_CHARS]

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    def __bool__(self) -> bool:             # an empty name reads as "the message", as a str path did
        return bool(str(self))


def _at(path: "str | _Path", key: Any) -> "str | _Path":
    """The path of `key` in the value at `path` ("result[3]", "state['w']"): a `_Path`, str() when shown."""
    return _Path(path, key)


class Schema:
    """One kind of value. `check` raises Malformed naming `path` when `value` does not fit."""

    def check(self, value: Any, path: "str | _Path") -> None:
        """`path`: where `value` lies in the message ("" for the whole message)."""
        raise NotImplementedError

    def fail(self, value: Any, path: "str | _Path", wanted: str) -> Malformed:
        return Unfit(value, path, wanted)


@dataclass(frozen=True)
class Int(Schema):
    """An integer (not a bool) in [low, high] (None: unbounded)."""

    low: int | None = None
    high: int | None = None

    def check(self, value, path):
        if type(value) is not int:
            raise self.fail(value, path, "an integer")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            bounds = (f"from {self.low} to {self.high}" if self.low is not None and self.high is not None
                      else f"of at least {self.low}" if self.low is not None else f"of at most {self.high}")
            raise self.fail(value, path, f"an integer {bounds}")


@dataclass(frozen=True)
class Number(Schema):
    """An int or float (inf and nan included: training can diverge); with `booleans`, a bool too
    (a bool tensor's `tolist()`)."""

    booleans: bool = False

    def check(self, value, path):
        if (isinstance(value, bool) and not self.booleans) or not isinstance(value, (int, float)):
            raise self.fail(value, path, "a number")


@dataclass(frozen=True)
class Bool(Schema):
    def check(self, value, path):
        if not isinstance(value, bool):
            raise self.fail(value, path, "true or false")


@dataclass(frozen=True)
class Null(Schema):
    def check(self, value, path):
        if value is not None:
            raise self.fail(value, path, "null")


@dataclass(frozen=True)
class Text(Schema):
    """A string of at most `max_chars`; with `choices`, one of them."""

    max_chars: int = 100
    choices: Collection[str] | None = None

    def check(self, value, path):
        if not isinstance(value, str):
            raise self.fail(value, path, "a string")
        if len(value) > self.max_chars:
            raise self.fail(value, path, f"a string of at most {self.max_chars} characters")
        if self.choices is not None and value not in self.choices:
            names = sorted(self.choices)
            if not names:
                raise Malformed(f"{path or 'the message'} is {shown(value)}, where none is expected")
            listed = ", ".join(names[:6]) + (f" or {len(names) - 6} more" if len(names) > 6 else "")
            raise self.fail(value, path, f"one of {listed}")


@dataclass(frozen=True)
class OneOf(Schema):
    options: tuple[Schema, ...]

    def check(self, value, path):
        errors = []
        for option in self.options:
            try:
                return option.check(value, path)
            except Unfit as exc:
                errors.append(exc.wanted)
            except Malformed as exc:
                errors.append(str(exc).split(", not ", 1)[-1])
        raise self.fail(value, path, " or ".join(errors))


@dataclass(frozen=True)
class ListOf(Schema):
    item: Schema
    max_items: int = 100_000

    def check(self, value, path):
        if not isinstance(value, list):
            raise self.fail(value, path, "a list")
        if len(value) > self.max_items:
            raise self.fail(value, path, f"a list of at most {self.max_items} items")
        for i, v in enumerate(value):
            self.item.check(v, _at(path, i))


@dataclass(frozen=True)
class MapOf(Schema):
    """An object of at most `max_items` fields, each name a Text(`max_key_chars`), each value a `value`."""

    value: Schema
    max_items: int = 10_000
    max_key_chars: int = 200

    def check(self, value, path):
        if not isinstance(value, dict):
            raise self.fail(value, path, "an object")
        if len(value) > self.max_items:
            raise self.fail(value, path, f"an object of at most {self.max_items} fields")
        for k, v in value.items():
            if len(str(k)) > self.max_key_chars:
                raise Malformed(f"{path or 'the message'} has a field name of {len(str(k))} characters "
                                f"(at most {self.max_key_chars})")
            self.value.check(v, _at(path, k))


@dataclass(frozen=True)
class Fields(Schema):
    """An object with every `required` field, perhaps some `optional` ones, and no other."""

    required: Mapping[str, Schema]
    optional: Mapping[str, Schema] = field(default_factory=dict)

    def check(self, value, path):
        if not isinstance(value, dict):
            raise self.fail(value, path, "an object")
        for k in value:
            if k not in self.required and k not in self.optional:
                raise Malformed(f"{path or 'the message'} has a field {shown(k)} it cannot have")
        for k, schema in self.required.items():
            if k not in value:
                raise Malformed(f"{path or 'the message'} has no field {k!r}")
            schema.check(value[k], _at(path, k))
        for k, schema in self.optional.items():
            if k in value:
                schema.check(value[k], _at(path, k))


@dataclass(frozen=True)
class Nested(Schema):
    """A `leaf`, or a list of Nested values at most `max_depth` deep: a tensor's `tolist()`."""

    leaf: Schema
    max_depth: int = 8

    def check(self, value, path):
        if not isinstance(value, list):
            return self.leaf.check(value, path)
        if self.max_depth <= 0:
            raise self.fail(value, path, "a number (the tensor has too many dimensions)")
        if type(self.leaf) is Number and set(map(type, value)) <= _NUMBERS:
            return                          # a row of plain numbers (what json.loads makes) fits
        inner = Nested(self.leaf, self.max_depth - 1)
        for i, v in enumerate(value):
            inner.check(v, _at(path, i))


@dataclass(frozen=True)
class Plain(Schema):
    """Any JSON value at most `max_depth` deep (what the channel already guarantees)."""

    max_depth: int = MAX_DEPTH

    def check(self, value, path):
        if nesting_depth(value, self.max_depth) > self.max_depth:
            raise self.fail(value, path, f"a value nested at most {self.max_depth} deep")


@dataclass(frozen=True)
class Shape(Schema):
    """A tensor's shape: at most MAX_SHAPE_DIMS sizes >= 0 whose non-zero product is below
    MAX_LAYOUT_ELEMENTS, so torch can lay it out (a size-0 tensor of shape [0, 2**62, 2**62]
    overflows torch's strides)."""

    def check(self, value, path):
        ListOf(Int(0), MAX_SHAPE_DIMS).check(value, path)
        product = 1
        for size in value:
            product *= max(size, 1)
            if product >= MAX_LAYOUT_ELEMENTS:
                raise self.fail(value, path, "a shape torch can lay out")


def shape_of(value: Any, path: str = "shape") -> list[int]:
    """`value` as a tensor's shape, or Malformed (`Shape`)."""
    Shape().check(value, path)
    return list(value)


def check(value: Any, schema: Schema, what: str, path: str = "") -> None:
    """Raise Malformed("<what>: <the first field that does not fit>") unless `value` fits `schema`."""
    try:
        schema.check(value, path)
    except Malformed as exc:
        raise Malformed(f"{what}: {exc}") from None


TENSOR_VALUES = Nested(Number(booleans=True))       # one tensor's values, as `tensor.tolist()` gives them
STATE = MapOf(TENSOR_VALUES)                        # a state dict: name -> values
