"""The question registry: every module in this package defines one question
as `QUESTION = Question(...)`. Adding a question is adding a module here (and
its reference and solution); the engine, the CLI and the templates find it.
"""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import lru_cache

from shardlab.autograder.errors import ShardlabError
from shardlab.autograder.engine.parts import Part


@dataclass(frozen=True)
class Question:
    number: int
    module: str          # assignments/<module>.py
    title: str
    template: str        # templates/questions/<template>, the handout partial
    parts: tuple[Part, ...]
    worked: object = None  # cfg -> dict[str, Worked], the answer key's derivations


@lru_cache(maxsize=1)
def questions() -> tuple[Question, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "QUESTION"):
            found.append(mod.QUESTION)
    return tuple(sorted(found, key=lambda q: q.number))


def all_parts() -> list[Part]:
    return [p for q in questions() for p in q.parts]


def part_points(part: Part, cfg) -> float:
    """Points of a part for this course: the config's [points] override or the default."""
    return dict(cfg.points).get(part.id, part.points) if part.kind == "auto" else 0.0


def check_points_config(cfg) -> None:
    ids = {p.id for p in all_parts()}
    unknown = sorted(set(dict(cfg.points)) - ids)
    if unknown:
        raise ShardlabError(f"config [points] names unknown parts: {', '.join(unknown)} "
                            f"(parts: {', '.join(sorted(ids))})")


def answer_key(cfg) -> dict[str, dict]:
    """{question number: {key: Worked}}: every question's worked derivations for this config."""
    return {str(q.number): q.worked(cfg) for q in questions() if q.worked}


def task_ids() -> dict[tuple[str, str], str]:
    """(module, function or class) -> task id, for the stub generator."""
    return {(p.module, p.function): p.id for p in all_parts() if p.function}
