"""The loaded course: one read, checked section per TOML section, and `load_config`.

`load_config(None)` gives the default course (reference/course.toml, the XXL
problem); `load_config(path)` reads an instructor's copy. Every section is
read as `config.sections` declares it (a course's own question's as its
folder's `config.py` does, `config.own`); unknown sections and keys, wrong
types, non-finite numbers and impossible values are one-line errors naming
the key. The code reads `cfg.<section>.<key>`; the names of earlier releases
still answer (`config.renamed`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from shardlab.autograder.core.errors import ShardlabError
from shardlab.reference.config import own
from shardlab.reference.config.renamed import Renamed
from shardlab.reference.config.sections import (SECTIONS, TABLES, BucketsSection, Comm4dSection, CourseSection,
                                                FsdpSection, GradescopeSection, GradingSection, MemorySection,
                                                PipelineSection, Section, read)
from shardlab.reference.config.variants import Draw, parse_draws
from shardlab.reference.specs import HARDWARE, NETWORKS, ModelConfig

DEFAULT_SOURCE = "default course (reference/course.toml)"
SPECIAL = ("points", "hardware", "network", "variants")      # sections that are no `Section`


@dataclass(frozen=True)
class CourseConfig:
    """A course, as read: each section's keys as declared (`cfg.memory.gpu`, `cfg.comm4d.x`), the model as
    the reference's `ModelConfig`, the [points] overrides, the own questions' sections (`cfg.<module>`),
    and where it came from."""

    course: CourseSection
    model: ModelConfig
    memory: MemorySection
    fsdp: FsdpSection
    comm4d: Comm4dSection
    buckets: BucketsSection
    pipeline: PipelineSection
    grading: GradingSection = GradingSection()
    gradescope: GradescopeSection = GradescopeSection()
    points: tuple[tuple[str, float], ...] = ()   # [points] overrides, (part id or question name, points)
    own: tuple[tuple[str, Section], ...] = ()    # (question module, its [<module>] section), `config.own`
    source: str = DEFAULT_SOURCE
    sha256: str = ""            # of the config file's bytes: which course graded a report (`engine.grading`)
    # what a per-student variant draws ([variants], `Draw`); None: the default draw (`default_draws`)
    draws: tuple[Draw, ...] | None = None
    data_json: str = ""         # the parsed TOML, so a variant re-reads it with its own values (`with_values`)

    def __getattr__(self, name: str) -> Any:
        """An own question's section by its module's name (`cfg.tp.devices`)."""
        for module, section in self.__dict__.get("own", ()):
            if module == name:
                return section
        raise AttributeError(f"{type(self).__name__} has no {name!r}")

    # the names of earlier releases (`config.renamed`; ARCHITECTURE.md, "The cfg contract")
    course_name = Renamed("course.name")
    assignment_name = Renamed("course.assignment")
    seed = Renamed("course.seed")
    secret = Renamed("course.secret")
    questions = Renamed("course.questions")
    question_dirs = Renamed("course.question_dirs")
    answer_points = Renamed("course.answer_points")
    scaffolding = Renamed("course.scaffolding")
    tokens_per_device = Renamed("memory.tokens_per_device")
    gpu = Renamed("memory.gpu")
    fsdp_device = Renamed("memory.fsdp_device")
    mesh = Renamed("comm4d")
    require_walls = Renamed("grading.require_walls")
    budget_seconds = Renamed("grading.budget_seconds")


def default_value(section: str, name: str) -> Any:
    """The declared default of the key [section].name."""
    return SECTIONS[section].model_fields[name].default


def _tables(data: dict) -> dict[str, dict]:
    """The validation context: the presets plus the course's [hardware.NAME] and [network.NAME] tables."""
    named: dict[str, dict] = {"hardware": dict(HARDWARE), "networks": dict(NETWORKS)}
    for section, pool in (("hardware", named["hardware"]), ("network", named["networks"])):
        tables = data.get(section, {})
        if not isinstance(tables, dict):
            raise ShardlabError(f"config [{section}] must hold tables, e.g. [{section}.\"My name\"]")
        for name, table in tables.items():
            if name in pool:
                raise ShardlabError(f"config [{section}.\"{name}\"] redefines the preset {name!r}: give yours "
                                    "another name")
            pool[name] = read(TABLES[section], table, f"[{section}.\"{name}\"]", {}).named(name)  # type: ignore[attr-defined]
    return named


def own_question_dirs(dirs: tuple[str, ...], base: Path | None) -> tuple[str, ...]:
    """[course] question_dirs as absolute folders: relative ones against `base`, the config file's folder
    (so a batch child or a Gradescope run given the config's absolute path finds them). Each must be a
    folder. Without a base (a variant re-read by `with_values`, which keeps its course's folders) they
    are kept as given."""
    if base is None:
        return dirs
    found = []
    for given in dirs:
        folder = (base / given).resolve()
        if not folder.is_dir():
            raise ShardlabError(f"config [course].question_dirs names {given!r}, which is no folder ({folder})")
        found.append(str(folder))
    return tuple(found)


def _points(table: Any) -> tuple[tuple[str, float], ...]:
    """[points]: "<part id>" or <question> = a finite number of points >= 0."""
    if not isinstance(table, dict):
        raise ShardlabError("config [points] must be a table")
    points = {}
    for part_id, value in table.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ShardlabError(f"config [points].\"{part_id}\" must be a finite number >= 0, got {value!r}")
        points[str(part_id)] = float(value)
    return tuple(sorted(points.items()))


def _parse(data: dict, source: str, sha256: str = "", base: Path | None = None) -> CourseConfig:
    context = _tables(data)
    course = read(CourseSection, data.get("course", {}), "[course]", context)
    course = course.model_copy(update={"question_dirs": own_question_dirs(course.question_dirs, base)})  # type: ignore[attr-defined]
    declared: dict[str, type[Section]] = {**SECTIONS, **own.sections(course.question_dirs)}  # type: ignore[attr-defined]
    for section, table in data.items():
        if section not in declared and section not in SPECIAL:
            raise ShardlabError(f"config has an unknown section [{section}] "
                                f"(known: {', '.join(sorted([*declared, *SPECIAL]))})")
        if not isinstance(table, dict):
            raise ShardlabError(f"config [{section}] must be a table")
    read_ = {name: read(model, data.get(name, {}), f"[{name}]", context) for name, model in declared.items()}
    read_["course"] = course
    model = ModelConfig(**read_["model"].model_dump())
    questions = course.questions  # type: ignore[attr-defined]
    if not questions or "pipeline" in questions:      # its rule binds only a course that sets it
        read_["pipeline"].checked(model.num_blocks)  # type: ignore[attr-defined]
    if not questions or "comm4d" in questions:        # likewise: the mesh must fit its chip's torus
        read_["comm4d"].checked()  # type: ignore[attr-defined]
    drawable = {name: m for name, m in declared.items() if name not in ("course", "grading", "gradescope")}
    return CourseConfig(
        **{name: read_[name] for name in SECTIONS if name != "model"}, model=model,  # type: ignore[arg-type]
        points=_points(data.get("points", {})),
        own=tuple((name, read_[name]) for name in declared if name not in SECTIONS),
        source=source, sha256=sha256,
        draws=parse_draws(data["variants"], drawable, questions, context) if "variants" in data else None,
        data_json=json.dumps(data, sort_keys=True, default=str),
    )


EXERCISE = ("model", "memory", "fsdp", "comm4d", "buckets", "pipeline")   # what a variant may change


def with_values(cfg: CourseConfig, values: dict[str, Any]) -> CourseConfig:
    """The course with some keys replaced ({"model.d_model": 8192, ...}), read
    again as a whole, so every check of the config holds for the result
    (a ShardlabError names what does not). Only the exercise's numbers change
    (the model's, the questions' sections, an own question's): the course's
    name, secret, points and settings stay `cfg`'s own."""
    data = json.loads(cfg.data_json) if cfg.data_json else {}
    data.pop("variants", None)
    data.setdefault("course", {})["question_dirs"] = list(cfg.course.question_dirs)   # absolute already
    for dotted, value in values.items():
        section, name = dotted.split(".")
        data.setdefault(section, {})[name] = value
    fresh = _parse(data, cfg.source)
    return dataclasses.replace(cfg, own=fresh.own, **{name: getattr(fresh, name) for name in EXERCISE})


def replaced(cfg: CourseConfig, values: dict[str, Any]) -> CourseConfig:
    """The course with some settings replaced as they are, unchecked ({"course.secret": "s", "comm4d.x": 8}):
    what a test or a caller that builds a course by hand needs; `with_values` checks them."""
    sections: dict[str, dict[str, Any]] = {}
    for dotted, value in values.items():
        section, name = dotted.split(".")
        sections.setdefault(section, {})[name] = value
    changes: dict[str, Any] = {}
    for section, update in sections.items():
        current = getattr(cfg, section)
        changes[section] = (current.model_copy(update=update) if isinstance(current, Section)
                            else dataclasses.replace(current, **update))
    return dataclasses.replace(cfg, **changes)


def load_config(path: str | Path | None = None) -> CourseConfig:
    """Read a course config; None means the shipped default course."""
    if path is None:
        raw = resources.files("shardlab.reference").joinpath("course.toml").read_bytes()
        return _parse(tomllib.loads(raw.decode()), DEFAULT_SOURCE,
                      hashlib.sha256(raw).hexdigest(), Path(str(resources.files("shardlab.reference"))))
    path = Path(path)
    if not path.is_file():
        raise ShardlabError(f"config file not found: {path}")
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        why = (str(exc) or type(exc).__name__).splitlines()[0]
        raise ShardlabError(f"config {path} is not valid TOML: {why}") from None
    return _parse(data, str(path), hashlib.sha256(raw).hexdigest(), path.resolve().parent)
