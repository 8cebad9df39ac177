"""`[variants]`: which config keys a per-student variant draws, and from what.

A drawn key is `section.key` of [model] or of a section of a question the
course sets (the package's or the course's own, `config.own`), checked as its
declaration says (`sections`), plus `model.ffn_ratio` (d_ff drawn as d_model
times a ratio). Without the section, `default_draws` says what is drawn.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from shardlab.autograder.core.errors import ShardlabError
from shardlab.reference.config.fields import Number, one_line
from shardlab.reference.config.sections import Section
from shardlab.reference.specs import Hardware, Network

FFN_RATIO = "model.ffn_ratio"     # F / D: d_ff drawn as d_model times this ratio (a multiple of 128)


@dataclass(frozen=True)
class Draw:
    """One `[variants]` entry: the config key `key` ("model.d_model") is drawn
    uniformly from `choices`, or from min, min + step, ..., max. The key
    "model.ffn_ratio" draws F / D instead of F (F = D * ratio, rounded to a
    multiple of 128)."""

    key: str
    choices: tuple = ()
    min: float = 0
    max: float = 0
    step: float = 1

    def pick(self, rng) -> Any:
        """One value, uniformly (`rng`: a random.Random)."""
        if self.choices:
            return rng.choice(self.choices)
        k = rng.randint(0, int((self.max - self.min) // self.step))
        value = self.min + k * self.step
        return value if isinstance(value, int) else round(value, 12)   # no 0.30000000000000004


def drawable(sections: dict[str, type[Section]]) -> dict[str, tuple[TypeAdapter, bool]]:
    """{"section.key": (its check, whether it is a number)} for every key a variant may draw: [model]'s
    (but its name) and those of the sections `sections` names, plus model.ffn_ratio."""
    found: dict[str, tuple[TypeAdapter, bool]] = {
        FFN_RATIO: (TypeAdapter(Annotated[Number, Field(gt=0)]), True)}
    for section, model in sections.items():
        for name, field in model.model_fields.items():
            if (section, name) != ("model", "name"):
                declared: Any = Annotated[(field.annotation, *field.metadata)]   # the key's type and its checks
                adapter: TypeAdapter = TypeAdapter(declared)
                found[f"{section}.{name}"] = (adapter, field.annotation in (int, float))
    return found


def _checked(adapter: TypeAdapter, value: Any, where: str, context: dict[str, Any]) -> Any:
    """`value` as the key's declaration reads it; a name stays a name (what `with_values` writes back)."""
    try:
        checked = adapter.validate_python(value, context=context)
    except ValidationError as error:
        raise ShardlabError(one_line(error, lambda loc: where)) from None
    return value if isinstance(checked, (Hardware, Network)) else checked


def parse_draws(table: Any, sections: dict[str, type[Section]], questions: tuple[str, ...],
                context: dict[str, Any]) -> tuple[Draw, ...]:
    """[variants]: `section.key = [choices]` or `{ min = .., max = .., step = .. }` per drawn key."""
    if not isinstance(table, dict):
        raise ShardlabError("config [variants] must be a table")
    known = drawable(sections)
    flat = {f"{section}.{name}": spec for section, sub in table.items()
            for name, spec in (sub.items() if isinstance(sub, dict) else [("", sub)])}
    draws = []
    for name, spec in flat.items():
        where = f"[variants] {name}"
        section = name.partition(".")[0]
        adapter, numeric = known.get(name, (None, False))
        if adapter is None:
            raise ShardlabError(f"config {where} is no key a variant can draw (drawn: section.key of "
                                f"[model] or a question's section, e.g. model.d_model, memory.gpu)")
        if section != "model" and questions and section not in questions:
            raise ShardlabError(f"config {where} draws for question {section!r}, which this course does not "
                                f"set ([course] questions = {list(questions)})")
        if isinstance(spec, list):
            if not spec:
                raise ShardlabError(f"config {where} is an empty list: nothing to draw from")
            draws.append(Draw(name, tuple(_checked(adapter, v, f"{where}[{i}]", context)
                                          for i, v in enumerate(spec))))
        elif isinstance(spec, dict) and numeric:
            extra = set(spec) - {"min", "max", "step"}
            if extra or not {"min", "max"} <= set(spec):
                raise ShardlabError(f"config {where} must be a list or {{ min = .., max = .., step = .. }}")
            lo, hi = (_checked(adapter, spec[b], f"{where}.{b}", context) for b in ("min", "max"))
            step = _checked(adapter, spec.get("step", 1), f"{where}.step", context)
            if lo > hi:
                raise ShardlabError(f"config {where} has min {lo} > max {hi}: nothing to draw from")
            draws.append(Draw(name, (), lo, hi, step))
        else:
            raise ShardlabError(f"config {where} must be a list of values"
                                + (" or { min = .., max = .., step = .. }" if numeric else "")
                                + f", got {spec!r}")
    if FFN_RATIO in flat and "model.d_ff" in flat:
        raise ShardlabError("config [variants] draws both model.d_ff and model.ffn_ratio: draw one")
    return tuple(draws)


def default_draws(cfg) -> tuple[Draw, ...]:
    """Without [variants]: the model's d_model and d_ff within ±25 % of the
    course's, in multiples of 128, and num_blocks within ±25 %; everything else
    stays the course's."""
    model = cfg.model
    widths = [Draw(f"model.{k}", (), 128 * max(1, math.ceil(0.75 * w / 128)),
                   128 * max(1, math.floor(1.25 * w / 128)), 128)
              for k, w in (("d_model", model.d_model), ("d_ff", model.d_ff))]
    return (*widths, Draw("model.num_blocks", (), max(1, math.ceil(0.75 * model.num_blocks)),
                          max(1, math.floor(1.25 * model.num_blocks)), 1))
