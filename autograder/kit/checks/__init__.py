"""What the distributed parts check of a run: the comparators of every part
with probe "gloo", one module per question (fsdp, buckets, comm4d,
pipeline), each ending with its comparators under upper-case names.

Each judges the list of per-rank values a scenario's `report` returns (the
scenarios package). The question definitions use these objects, and the
starter kit ships this package with the rest of the kit, so a student's
local run of a public case is judged by the grader's own rules and worded
the same. That is why nothing here knows an answer: what a check needs
beyond the run (a storage budget, the bytes of each bucket) comes in as
`expected`, which the grader computes and, for public cases, the kit is
given.

A comparator is known by its name: "<module>.<NAME>" for a question's
("fsdp.FSDP_STORAGE"), "<NAME>" for one shared here. The kit's public runs
refer to comparators by that name (`comparator_named`), and the build
refuses a distributed part whose comparator has none (`name_of`).
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
from functools import lru_cache

from ..rank_comparison import StatesMatch

TRAINS_LIKE_ONE_PROCESS = StatesMatch()
"""Every rank's final weights equal single-process full-batch training (questions 2 and 5; question 4's
`buckets.DDP_TRAINS_LIKE_ONE_PROCESS` also names a missing broadcast)."""


def _comparators(short: str, module) -> dict[str, object]:
    return {f"{short}.{name}": value for name, value in vars(module).items() if name.isupper() and callable(value)}


@lru_cache(maxsize=1)
def _in_package() -> dict[str, object]:
    """This package's comparators and each of its question modules' (found once: its files do not
    change while a process runs)."""
    found = {name: value for name, value in globals().items() if name.isupper()}
    for info in pkgutil.iter_modules(__path__):
        found.update(_comparators(info.name, importlib.import_module(f"{__name__}.{info.name}")))
    return found


def _named() -> dict[str, object]:
    """Every comparator by its name: the package's, and those of a course's own question loaded into
    this package from its folder since (`checks.py`, imported as a module of this package)."""
    found = dict(_in_package())
    for name, module in list(sys.modules.items()):
        if name.startswith(f"{__name__}.") and module is not None:
            found.update(_comparators(name.rpartition(".")[2], module))
    return found


def comparator_named(name: str):
    """The comparator called `name` ("fsdp.FSDP_STORAGE", "TRAINS_LIKE_ONE_PROCESS")."""
    return _named()[name]


def name_of(compare) -> str | None:
    """The name of a comparator, or None for one not defined in this package."""
    return next((name for name, value in _named().items() if value is compare), None)
