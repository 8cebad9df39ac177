"""The plan of a grading: every part's cases and their expected values for a
course config. Grading, the starter kit's public checks and the otter export
all read the same plan, so a case the kit shows is the case the grader runs.

The engine seeds each part's generator from the course seed and the part id
(`part_rng`); questions never seed themselves. Cases and expected values are
computed once per process and config (they are pure functions of both).
"""
from __future__ import annotations

import random
import threading
from functools import lru_cache

from shardlab.autograder.core.parts import Case, Part
from shardlab.autograder.questions import all_parts

REFERENCE_ATTEMPTS = 2          # a failing reference computation is retried once


def part_rng(cfg, part: Part) -> random.Random:
    """The generator a part draws its cases from: course seed and part id."""
    return random.Random(f"{cfg.course.seed}:{part.id}")


def find_part(part_id: str) -> Part:
    """The part with this task id; KeyError naming it when there is none."""
    for part in all_parts():
        if part.id == part_id:
            return part
    raise KeyError(f"no part {part_id!r}")


@lru_cache(maxsize=256)
def part_cases(cfg, part_id: str) -> list[Case]:
    """The part's cases (public and hidden) for this course."""
    part = find_part(part_id)
    return part.cases(cfg, part_rng(cfg, part))


def case_groups(cases: list[Case]) -> list[tuple[str, list[int]]]:
    """(group name, indices of its cases) in order of first appearance: the
    units a part's points are split over (Case.group)."""
    groups: dict[str, list[int]] = {}
    for k, case in enumerate(cases):
        groups.setdefault(case.group, []).append(k)
    return list(groups.items())


def group_points(points: float, n: int) -> list[float]:
    """`points` split evenly over n groups. Unrounded: a part scores
    `points * passed / n` (grading.score_part) and otter rounds the sum of
    its passed cases to 5 decimals, which gives the same number."""
    return [points / n] * n if n > 0 else []


def expected_values(cfg, part_id: str) -> list[list]:
    """The reference's values for every call of every case, case by case.

    A distributed part's values come from reference trainings in torch, the same for
    every submission drawing the same data seed key: they are made once per machine and
    key of the pool (`reference.cache`; `shardlab warm` makes them all), so a grading's
    own process never has to import torch. The cache's key holds every call, the run
    seeds really used (the machine's secret ones, or the public ones in the kit's build)
    and the source of the code that computes them."""
    if find_part(part_id).probe != "gloo":
        return _expected_values(cfg, part_id, None)
    from shardlab.autograder.sandbox.gloo.seeds import seeds_in_use
    return _expected_values(cfg, part_id, seeds_in_use())


_REFERENCE_LOCK = threading.RLock()
# Every package expected values can be computed by, each with all its modules at any depth (the cache's
# key digests them: `reference.cache`): the reference, the question definitions and the parts they are
# made of, and the kit's scenarios, models and training loops (the one-process runs are the kit's).
REFERENCE_PACKAGES = ("shardlab.reference", "shardlab.autograder.questions", "shardlab.autograder.core",
                      "shardlab.autograder.kit")


@lru_cache(maxsize=256)
def _expected_values(cfg, part_id: str, seeds_used: str | None) -> list[list]:
    """`expected_values`, remembered per process for the seeds in use (`seeds.seeds_in_use()`:
    the kit's public seeds or one key of the pool; None for a part without runs)."""
    part = find_part(part_id)
    cases = part_cases(cfg, part_id)

    def compute() -> list[list]:
        # one at a time in a process (gradings on threads: `shardlab check --jobs`). Its seeded draws from
        # torch's one global generator are guarded where they happen (`toy_models.seeded_cpu_rng`), as
        # every such draw in the grader must be: this lock alone left the other threads' draws unguarded
        with _REFERENCE_LOCK:
            return [part.expect(c) for c in cases]
    if part.probe != "gloo":
        return compute()
    from shardlab.autograder.sandbox.gloo.seeds import data_seed
    from shardlab.reference.cache import once_per_machine
    calls = [[c.module, c.function, c.args] for case in cases for c in case.calls]
    seeds = {c.args["seed"]: data_seed(c.args["seed"]) for case in cases for c in case.calls if "seed" in c.args}
    return once_per_machine(f"expected-{part_id}", {"calls": calls, "seeds": sorted(seeds.items())}, compute,
                            REFERENCE_PACKAGES)


# forget every part's remembered values (tests that swap a part's reference; ignore: mypy does not
# model attributes set on a function)
expected_values.cache_clear = _expected_values.cache_clear     # type: ignore[attr-defined]


def part_plan(cfg, part_id: str) -> tuple[list[Case], list[list]]:
    """A part's cases and their expected values."""
    return part_cases(cfg, part_id), expected_values(cfg, part_id)


def expected_or_error(cfg, part_id: str) -> tuple[list | None, str | None]:
    """A part's expected values, the computation retried once; (None, reason)
    when the reference still fails (the reason is for the instructor: no
    student is blamed for it, see `grading`)."""
    for _ in range(REFERENCE_ATTEMPTS):
        try:
            return expected_values(cfg, part_id), None
        except Exception as exc:        # noqa: BLE001 - any failure of ours is confined to the part
            reason = f"computing the expected values failed: {type(exc).__name__}: {exc}"
    return None, reason


def warm(cfg) -> dict[str, str]:
    """Compute every auto part's expected values once, so that the on-disk
    caches (`reference.cache`: the pool of data seed keys, the `fully_shard`
    agreement, for every key of the pool) are full before the first submission: the Gradescope image's
    setup.sh runs this through `shardlab warm`. Returns {part id: reason} for
    the parts whose reference failed (empty when all is well)."""
    from shardlab.autograder.sandbox.gloo.seeds import data_seed_pool, pool_key
    failed = {}
    for index in range(len(data_seed_pool())):         # every key a grading may draw
        with pool_key(index):
            for part in all_parts(cfg):
                if part.kind == "auto" and part.id not in failed:
                    _, reason = expected_or_error(cfg, part.id)
                    if reason:
                        failed[part.id] = reason
    return failed
