"""The question registry: every folder in this package is one question, whose
`__init__` defines `QUESTION = Question(...)` (its parts, points, cases,
comparators and misconceptions) and whose `figures` module draws its
teaching figures. Adding a question is adding a folder here, beside its
three same-named files (`reference/<name>.py`, `solutions/<name>.py`,
`templates/questions/<name>.md.j2`); the engine, the CLI and the templates
find it. A distributed question's scenario and run checks are in the kit
(`kit.scenarios.<name>`, `kit.checks.<name>`), because the starter kit
runs them too.

A course may bring questions of its own, one folder each outside the
package (`[course] question_dirs`; the layout is `core.course_folders`'s).
`questions(cfg)` loads them the first time it sees the course and sets them
beside the package's, so everything that goes through it takes them as it
takes a shipped question; from then on `registered()` knows them too, for
look-ups by part id. Their module names, part ids and question numbers may
not be the package's, nor another course folder's.
"""
from __future__ import annotations

import importlib
import pkgutil
import weakref
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from shardlab.autograder.core import course_folders
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.parts import Part
from shardlab.autograder.questions import own_checks

if TYPE_CHECKING:
    from shardlab.reference.config import CourseConfig


@dataclass(frozen=True)
class Question:
    number: int
    module: str          # assignments/<module>.py
    title: str
    template: str        # templates/questions/<template>, the handout partial
    parts: tuple[Part, ...]
    worked: Callable[[Any], dict[str, Any]] | None = None  # cfg -> dict[str, Worked], the answer key's derivations
    figures: tuple = ()    # its teaching figures (core.drawing.Diagram), placed by the template by name
    # cfg -> one sentence saying what happens instead when this course's numbers leave a sub-question
    # without a sensible answer ("1 (b): no FSDP degree fits ..."), None when they do not (`degeneracies`)
    degenerate: Callable[[CourseConfig], str | None] | None = None


@lru_cache(maxsize=1)
def shipped() -> tuple[Question, ...]:
    """Every question defined in this package, by number (the course's question bank)."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        if hasattr(mod, "QUESTION"):
            found.append(mod.QUESTION)
    return tuple(sorted(found, key=lambda q: q.number))


_OWN: dict[str, Question] = {}          # a course folder's path -> its question, once loaded
_SCENARIOS_CHECKED: set[tuple[str, str, int]] = set()   # (folder, course sha256, seed): `check_scenarios` done


def registered() -> tuple[Question, ...]:
    """Every question this process knows, by number: the package's, and those of every course folder
    loaded so far (`own_questions`)."""
    return tuple(sorted(shipped() + tuple(_OWN.values()), key=lambda q: q.number))


def own_questions(cfg) -> tuple[Question, ...]:
    """The course's own questions (`[course] question_dirs`), loaded on first sight. A folder that lacks
    a piece, fails to import, or whose module, part ids or number are already taken is a one-line error
    naming it."""
    out = []
    for folder in course_folders.question_folders(cfg.course.question_dirs):
        key = str(folder.path)
        if key not in _OWN:
            _OWN[key] = _loaded(folder)
        if (key, cfg.sha256, cfg.course.seed) not in _SCENARIOS_CHECKED:
            own_checks.check_scenarios(folder, _OWN[key], cfg)
            _SCENARIOS_CHECKED.add((key, cfg.sha256, cfg.course.seed))
        out.append(_OWN[key])
    return tuple(out)


def _loaded(folder: course_folders.QuestionFolder) -> Question:
    """The folder's QUESTION, its modules loaded, checked against every question known so far."""
    where = f"course question {folder.path}"
    taken = registered()
    if folder.name in {q.module for q in taken}:
        raise ShardlabError(f"{where}: a question named {folder.name!r} exists already: rename the folder")
    q = getattr(course_folders.load_folder(folder)["question.py"], "QUESTION", None)
    if not isinstance(q, Question):
        raise ShardlabError(f"{where}: question.py defines no QUESTION = Question(...)")
    if q.module != folder.name or q.template != f"{folder.name}.md.j2":
        raise ShardlabError(f"{where}: its QUESTION must have module={folder.name!r} and template="
                            f"{folder.name + '.md.j2'!r}, the folder's name (got {q.module!r}, {q.template!r})")
    if any(p.module != q.module for p in q.parts):
        raise ShardlabError(f"{where}: every part must grade assignments/{q.module}.py (module={q.module!r})")
    own_checks.check_parts(where, q.parts)
    owner = {p.id: other for other in taken for p in other.parts}
    clash = sorted({p.id for p in q.parts if p.id in owner})
    if clash:
        raise ShardlabError(f"{where}: part ids {', '.join(clash)} are question {owner[clash[0]].module!r}'s "
                            f"already: number the question past {max(o.number for o in taken)}")
    if q.number in {other.number for other in taken}:
        raise ShardlabError(f"{where}: question number {q.number} is taken: number it past "
                            f"{max(o.number for o in taken)}")
    return own_checks.guarded(q, folder.path)


def questions(cfg=None) -> tuple[Question, ...]:
    """The questions a course sets: the package's and the course's own (`own_questions`), narrowed to
    its config's `[course] questions` (module names; empty means all), in number order; without a
    config, every question of the package. Everything a course produces (handout, solutions, starter
    kit, otter zip, grading, `shardlab check`) goes through this; it reads the course's `plan`."""
    return shipped() if cfg is None else plan(cfg).questions


def _chosen(cfg) -> tuple[Question, ...]:
    chosen = cfg.course.questions
    pool = sorted(shipped() + own_questions(cfg), key=lambda q: q.number)
    return tuple(q for q in pool if not chosen or q.module in chosen)


def is_own(question: Question) -> bool:
    """Whether a question is a course's own (from a course folder), not the package's."""
    return all(question is not q for q in shipped())


def all_parts(cfg=None) -> list[Part]:
    """The parts of the course's questions; without a config, of every question known (`registered`)."""
    return [p for q in (questions(cfg) if cfg is not None else registered()) for p in q.parts]


def _question_of(part: Part) -> Question:
    return next(q for q in registered() if part in q.parts)


def part_points(part: Part, cfg) -> float:
    """Points of a part for this course (`plan`; `_points_of` says how they are set)."""
    found = plan(cfg).points.get(part.id)
    return _points_of(part, cfg) if found is None else found


def _points_of(part: Part, cfg) -> float:
    """`[points] "<part id>" = x` sets one
    part; `[points] <question> = total` scales that question's auto parts
    (after any part overrides) so that its non-bonus parts sum to `total`,
    keeping their proportions (bonus parts scale with them). A written part
    (kind "manual") has its own points or its `[points] "<id>"`, never scaled:
    the graders', outside the autograder's total (`hand_graded`)."""
    overrides = dict(cfg.points)
    if part.kind != "auto":
        return float(overrides.get(part.id, part.points))
    own = overrides.get(part.id, part.points)
    q = _question_of(part)
    if q.module not in overrides:
        return own
    base = sum(overrides.get(p.id, p.points) for p in q.parts if p.kind == "auto" and not p.bonus)
    return own * overrides[q.module] / base if base else 0.0


def hand_graded(cfg) -> list[tuple[Part, float]]:
    """(part, points) of every written part of the course's questions that carries points, in handout
    order: the manual questions of the Gradescope outline, beside the autograder's total."""
    found = [(p, part_points(p, cfg)) for q in questions(cfg) for p in q.parts if p.kind == "manual"]
    return [(p, points) for p, points in found if points > 0]


def check_points_config(cfg) -> None:
    """One-line errors for a course config that names what does not exist or is not set:
    an unknown question in [course] questions; a [points] key that is neither a part id
    nor a question name, or that belongs to a question the course does not set."""
    pool = shipped() + own_questions(cfg)
    known = [q.module for q in pool]
    unknown = [name for name in cfg.course.questions if name not in known]
    if unknown:
        raise ShardlabError(f"config [course] questions names unknown questions: {', '.join(unknown)} "
                            f"(known: {', '.join(known)})")
    chosen = {q.module for q in _chosen(cfg)}
    owner = {p.id: q.module for q in pool for p in q.parts} | {m: m for m in known}
    bad = sorted(k for k in dict(cfg.points) if k not in owner)
    if bad:
        raise ShardlabError(f"config [points] names unknown parts: {', '.join(bad)} "
                            f"(parts: {', '.join(sorted(p for p in owner if p not in known))}; "
                            f"or a question's total: {', '.join(known)})")
    unset = sorted(k for k in dict(cfg.points) if owner[k] not in chosen)
    if unset:
        raise ShardlabError(f"config [points] gives points to {', '.join(unset)}, of questions this course "
                            f"does not set ([course] questions: {', '.join(sorted(chosen))})")


def degeneracies(cfg) -> dict[str, str]:
    """{question module: sentence} for the questions this course sets (`questions(cfg)`) whose numbers
    make a sub-question degenerate (no FSDP degree fits, no batch is compute bound, fewer than one
    bucket, a one-stage pipeline...): what happens instead, with the reference's numbers. Empty when
    none is. `shardlab build` warns of each; the handout and the solutions say so (`plan`)."""
    return dict(plan(cfg).degeneracies)


def _degeneracies(cfg, chosen: tuple[Question, ...]) -> dict[str, str]:
    found = {}
    for q in chosen:
        sentence = q.degenerate(cfg) if q.degenerate else None
        if sentence:
            found[q.module] = sentence
    return found


@dataclass(frozen=True, eq=False)
class CoursePlan:
    """What a course's config implies, derived once per course (`plan`): its questions in number order,
    each part's points by part id, and which questions its numbers make degenerate (computed on first
    use: only `build` and the renderers ask)."""

    cfg: Any
    questions: tuple[Question, ...]
    points: dict[str, float]

    @classmethod
    def of(cls, cfg) -> CoursePlan:
        check_points_config(cfg)
        chosen = _chosen(cfg)
        return cls(cfg, chosen, {p.id: _points_of(p, cfg) for q in chosen for p in q.parts})

    @cached_property
    def degeneracies(self) -> dict[str, str]:
        return _degeneracies(self.cfg, self.questions)


_PLANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # a course -> its plan, while it lives


def plan(cfg) -> CoursePlan:
    """The course's `CoursePlan`, derived the first time a course is seen (the CLI does it as it loads
    one, so a bad [points] or [course] questions is one line before anything runs) and read from then
    on: equal courses share one."""
    found = _PLANS.get(cfg)
    if found is None:
        found = _PLANS[cfg] = CoursePlan.of(cfg)
    return found


def answer_key(cfg) -> dict[str, dict]:
    """{question number: {key: Worked}}: the course's questions' worked derivations for this config."""
    return {str(q.number): q.worked(cfg) for q in questions(cfg) if q.worked}


def task_ids() -> dict[tuple[str, str], str]:
    """(module, function or class) -> task id, for the stub generator."""
    return {(p.module, p.function): p.id for p in all_parts() if p.function}


def own_folder(question: Question) -> course_folders.QuestionFolder | None:
    """The course folder a course's own question was loaded from; None for the package's."""
    return next((course_folders.QuestionFolder(Path(path)) for path, q in _OWN.items()
                 if q is question), None)
