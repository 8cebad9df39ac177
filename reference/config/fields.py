"""What a course setting may hold: the kinds of value a TOML key takes, each
with its check and its one-line complaint, and `setting`, the declaration of
one key (its default, unit, allowed range and one line of help).

A kind is a pydantic v2 annotation (`Kind`): `Whole` (an integer; an
integral float such as 4e8 too, since TOML has no 4e8 integer), `Number` (a
finite float: NaN and the infinities are refused here, by type), `Text`,
`Flag`, `Names` (a list of strings), `OneOf` (one of a few strings), and the
names of a device, a device with ICI or a network, which resolve to the
preset's or the course's own `Hardware` / `Network` (the validation context
holds both, `NAMED`). `one_line` turns pydantic's first complaint into the
message users see: `config <key path> <what is allowed>, got <value>`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, Callable

from pydantic import Field, ValidationError, ValidationInfo
from pydantic_core import PydanticCustomError, core_schema

from shardlab.reference.specs import Hardware, Network

NAMED = ("hardware", "networks")     # the validation context: {name: Hardware}, {name: Network}


def _refuse(what: str, value: Any) -> PydanticCustomError:
    return PydanticCustomError("shardlab", "{what}, got {given}", {"what": what, "given": repr(value)})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(value: Any, info: ValidationInfo | None = None) -> int:
    if not _is_number(value):
        raise _refuse("must be an integer", value)
    if isinstance(value, float):
        if not value.is_integer():      # NaN and the infinities are not integers either
            raise _refuse("must be a whole number", value)
        value = int(value)
    return value


def _number(value: Any, info: ValidationInfo | None = None) -> float:
    if not _is_number(value):
        raise _refuse("must be a number", value)
    if not math.isfinite(value):
        raise _refuse("must be a finite number", value)
    return float(value)


def _text(value: Any, info: ValidationInfo | None = None) -> str:
    if not isinstance(value, str):
        raise _refuse("must be a string", value)
    return value


def _flag(value: Any, info: ValidationInfo | None = None) -> bool:
    if not isinstance(value, bool):
        raise _refuse("must be true or false", value)
    return value


def _names(value: Any, info: ValidationInfo | None = None) -> tuple[str, ...]:
    if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
        raise _refuse("must be a list of strings", value)
    return tuple(value)


def _named(pool: str, what: str, table: str) -> Callable[[Any, ValidationInfo], Any]:
    """The check of a key that names a device or network: the preset's or the course's own object."""
    def resolve(value: Any, info: ValidationInfo) -> Any:
        name = _text(value)
        known = (info.context or {})[pool]
        if what != "device" and table == "hardware":          # a device with ICI
            known = {n: h for n, h in known.items() if h.ici_bytes_per_second > 0}
        if name not in known:
            raise PydanticCustomError(
                "shardlab", "= {given} names no {what}; known: {known} (or define [{table}.\"{name}\"])",
                {"given": repr(name), "what": what, "known": ", ".join(map(repr, known)), "table": table,
                 "name": name})
        return known[name]
    return resolve


@dataclass(frozen=True)
class Kind:
    """A kind of value (`label`, as the config reference prints it) and its check. A `resolves` kind
    turns the name it is given into the object it names, so pydantic's own check of the type is skipped."""

    label: str
    check: Callable[[Any, ValidationInfo], Any]
    resolves: bool = False

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        if self.resolves:
            return core_schema.with_info_plain_validator_function(self.check)
        return core_schema.with_info_before_validator_function(self.check, handler(source))


@dataclass(frozen=True)
class OneOf:
    """One of a few strings: `options`, in the order the config reference lists them."""

    options: tuple[str, ...]

    @property
    def label(self) -> str:
        return "one of " + ", ".join(f'"{o}"' for o in self.options)

    def check(self, value: Any, info: ValidationInfo | None = None) -> str:
        if not isinstance(value, str) or value not in self.options:
            raise _refuse(f"must be one of {', '.join(map(repr, self.options))}", value)
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.with_info_plain_validator_function(self.check)


Whole = Annotated[int, Kind("integer", _whole)]
Number = Annotated[float, Kind("number", _number)]
Text = Annotated[str, Kind("string", _text)]
Flag = Annotated[bool, Kind("true or false", _flag)]
OptionalFlag = Annotated[bool | None, Kind("true or false", _flag)]    # absent (None) means a key not given
Names = Annotated[tuple[str, ...], Kind("list of strings", _names)]
Device = Annotated[Hardware, Kind("device: a preset or a [hardware.NAME]",
                                  _named("hardware", "device", "hardware"), resolves=True)]
IciDevice = Annotated[Hardware, Kind("device with ICI: a preset or a [hardware.NAME]",
                                     _named("hardware", "device with ICI (ici_bytes_per_second)", "hardware"),
                                     resolves=True)]
NetworkName = Annotated[Network, Kind("network: a preset or a [network.NAME]",
                                      _named("networks", "network", "network"), resolves=True)]


def setting(default: Any, help: str, *, unit: str = "", **allowed: Any) -> Any:
    """One key's declaration beside its type: its default (`...`: required), the unit its number is in,
    its allowed range (pydantic's gt=, ge=) and one line of help. A key that names a device or a
    network is resolved from its default too."""
    named = allowed.pop("named", False)
    extra: dict[str, Any] = {"unit": unit}
    if "plausible" in allowed:      # (low, high, what): outside it a course is warned, not refused (`plausible`)
        extra["plausible"] = allowed.pop("plausible")
    return Field(default, description=help, json_schema_extra=extra, validate_default=named or None,
                 **allowed)


def kind_of(field: Any) -> str:
    """The config reference's words for a declared key's kind ("integer", "one of ...")."""
    for meta in field.metadata:
        if isinstance(meta, (Kind, OneOf)):
            return meta.label
    return field.annotation.__name__ if isinstance(field.annotation, type) else str(field.annotation)


def unit_of(field: Any) -> str:
    return (field.json_schema_extra or {}).get("unit", "")


def range_of(field: Any) -> str:
    """The allowed range of a declared number, in words ("> 0", ">= 0"), or ""."""
    words = []
    for meta in field.metadata:
        for name, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
            if getattr(meta, name, None) is not None:
                words.append(f"{sign} {getattr(meta, name)}")
    return ", ".join(words)


def one_line(error: ValidationError, where: Callable[[tuple], str]) -> str:
    """The first of pydantic's complaints as users read it: `config <where(loc)> <what is allowed>`."""
    first = error.errors(include_url=False)[0]
    kind, loc, value = first["type"], tuple(first["loc"]), first.get("input")
    if kind == "shardlab":
        return f"config {where(loc)} {first['msg']}"
    if kind in ("greater_than", "greater_than_equal"):
        sign = {"greater_than": "positive", "greater_than_equal": "zero or more"}[kind]
        return f"config {where(loc)} must be {sign}, got {value}"
    if kind in ("less_than", "less_than_equal"):
        return f"config {where(loc)} {first['msg'].lower().replace('input ', 'must ')}, got {value}"
    return f"config {where(loc)}: {first['msg']}, got {value!r}"
