"""The `cfg` names of earlier releases, kept as aliases of today's.

Before every setting was declared once (`config.sections`), the loaded course
spelt some keys its own way: `cfg.mesh` for [comm4d], `cfg.gpu` for
[memory].gpu, `cfg.buckets.call_overhead` in seconds for [buckets]
call_overhead_us. Own questions written against that release use those names
(ARCHITECTURE.md, "The cfg contract"), so each still answers, and says once,
at `shardlab build`, what it is called now (`used`).
"""
from __future__ import annotations

from operator import attrgetter
from typing import Any

_USED: dict[str, str] = {}      # old name -> new name, for every alias read in this process


class Renamed:
    """A class attribute that reads `new` (a dotted path from the same object) under an old name, and
    records that it was read. `prefix` is how users reach the owner ("cfg", "cfg.fsdp")."""

    def __init__(self, new: str, prefix: str = "cfg") -> None:
        self.new, self.prefix, self.old = new, prefix, ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.old = name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        _USED.setdefault(f"{self.prefix}.{self.old}", f"{self.prefix}.{self.new}")
        return attrgetter(self.new)(obj)


def used() -> dict[str, str]:
    """{old name: new name} of every alias read so far in this process."""
    return dict(_USED)
