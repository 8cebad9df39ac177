"""The course config: one TOML file, every key described here once.

`load_config(None)` gives the default course (reference/course.toml, the XXL
problem); `load_config(path)` reads an instructor's copy. Unknown keys, wrong
types and impossible values are errors that name the key.
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
from shardlab.reference.specs import HARDWARE, NETWORKS, Hardware, ModelConfig, Network


@dataclass(frozen=True)
class Key:
    """One config key. kind: int (integral floats such as 4e8 accepted), float
    (any number: a key in bytes/s, FLOP/s or seconds), str, tuple (of strings)
    or bool. names: what a string must name, "hardware" (a preset or a
    `[hardware.NAME]` table), "ici" (hardware with ICI) or "network", checked
    once the course's own tables are known. default None: `_DEFAULTS_FROM`."""

    section: str
    name: str
    kind: type
    default: Any
    description: str
    choices: tuple = ()
    names: str = ""

    @property
    def where(self) -> str:
        return f"[{self.section}].{self.name}"

    def check(self, value: Any, where: str = "") -> Any:
        where = where or self.where
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind is int:
            if not number:
                raise ShardlabError(f"config {where} must be an integer, got {value!r}")
            if isinstance(value, float):
                if not value.is_integer():
                    raise ShardlabError(f"config {where} must be a whole number, got {value!r}")
                value = int(value)
        if self.kind is float:
            if not number:
                raise ShardlabError(f"config {where} must be a number, got {value!r}")
            value = float(value)
        if self.kind is str and not isinstance(value, str):
            raise ShardlabError(f"config {where} must be a string, got {value!r}")
        if self.kind is tuple and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ShardlabError(f"config {where} must be a list of strings, got {value!r}")
        if self.kind is bool and not isinstance(value, bool):
            raise ShardlabError(f"config {where} must be true or false, got {value!r}")
        zero_allowed = self.section == "hardware" and self.default == 0     # no ICI, no HBM figure given
        if self.kind in (int, float) and self.name != "seed" and (value < 0 or (value == 0 and not zero_allowed)):
            raise ShardlabError(f"config {where} must be {'zero or more' if zero_allowed else 'positive'}, "
                                f"got {value}")
        if self.choices and value not in self.choices:
            raise ShardlabError(
                f"config {where} must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
        return tuple(value) if self.kind is tuple else value


VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")   # Gradescope's results.json
GRADESCOPE_ID_FIELDS = ("email", "id")    # the documented users[] fields of submission_metadata.json
QUESTION_SECTIONS = ("memory", "fsdp", "comm4d", "buckets", "pipeline")    # a section per question module
WALL_REQUIREMENTS = ("full", "isolated", "unsafe-none")   # [grading] require_walls (`sandbox.walls`)
SCAFFOLDINGS = ("blank", "guided")        # how much of a design the stubs ship (publish.stubs)

SCHEMA: tuple[Key, ...] = (
    Key("course", "name", str, "Systems for Large Models", "course name shown on handouts"),
    Key("course", "assignment", str, "Assignment 2: Memory, FSDP, 4D parallelism, DDP buckets and pipelines",
        "assignment title shown on handouts"),
    Key("course", "seed", int, 20261122, "seed of the generated public and hidden test cases"),
    Key("course", "secret", str, "",
        "course secret that, with a student id, seeds per-student variants (`build --roster`, drawn as "
        "[variants] says) and turns on grading answers.toml; empty: no variants"),
    Key("course", "questions", tuple, (),
        "the questions this course sets, by module name (\"memory\", \"fsdp\", \"comm4d\", \"buckets\", "
        "\"pipeline\"); handouts, solutions, the starter kit, the otter zip and grading follow it. "
        "Empty or absent: every question"),
    Key("course", "question_dirs", tuple, (),
        "folders of this course's own questions, relative to this config file: each sub-folder is one "
        "question (question.py, reference.py, solution.py, template.md.j2; scenario.py and checks.py for a "
        "distributed part; ARCHITECTURE.md, \"Adding a question\"). They join the package's questions "
        "everywhere; [course] questions may name them. Empty: the package's questions only"),
    Key("course", "answer_points", int, 1,
        "points per question for the handout numbers in answers.toml (only with a secret)"),
    Key("course", "scaffolding", str, "blank",
        "what the stubs of the starter kit ship besides each graded function's and class's signature, task "
        "id, units and contract: \"blank\" nothing (the student designs every helper); \"guided\" also the "
        "solutions' hints (docstring paragraphs starting \"Hint:\") and their private helpers as a stubbed "
        "skeleton (`# BEGIN SCAFFOLD` blocks). Neither answers what the handout asks to derive",
        SCAFFOLDINGS),
    Key("model", "name", str, "XXL", "the model's name in the handout"),
    Key("model", "d_model", int, 16384, "model width D"),
    Key("model", "d_ff", int, 53248, "FFN hidden width F"),
    Key("model", "num_blocks", int, 126, "number of FFN blocks L"),
    Key("memory", "tokens_per_device", int, 4096,
        "tokens (batch x sequence) one device processes, for the activation memory"),
    Key("memory", "gpu", str, "H100", "device counted in part (a)", names="hardware"),
    Key("memory", "fsdp_device", str, "TPU v5p", "device one FSDP shard must fit in part (b)", names="hardware"),
    Key("fsdp", "device", str, "H100", "device whose FLOP/s C runs one FSDP unit's forward", names="hardware"),
    Key("fsdp", "tokens_per_device", int, 4096, "tokens per device in the FSDP overlap question"),
    Key("fsdp", "intra_network", str, "intra-node", "the network within one node (its alpha and beta)",
        names="network"),
    Key("fsdp", "intra_devices", int, None, "devices p sharding over the intra-node network "
        "(default: that network's devices)"),
    Key("fsdp", "inter_network", str, "inter-node", "the network across nodes", names="network"),
    Key("fsdp", "inter_devices", int, None, "devices p sharding over the inter-node network "
        "(default: that network's devices)"),
    Key("comm4d", "device", str, "TPU v5p", "chip of the 4D mesh: its C and W_ici", names="ici"),
    Key("comm4d", "x", int, 16, "FSDP (data) degree X"),
    Key("comm4d", "y", int, 4, "tensor-parallel degree Y"),
    Key("comm4d", "m_x", int, 2, "mesh axes M_X the X collectives use"),
    Key("comm4d", "m_y", int, 1, "mesh axes M_Y the Y collectives use"),
    Key("comm4d", "overlap", bool, True,
        "comms overlap compute, so the binding term is max(FSDP, TP); false sums them"),
    Key("buckets", "model_bytes", int, 400_000_000,
        "bytes s of gradients DDP all-reduces per step in the bucket question (100M FP32 parameters)"),
    Key("buckets", "bandwidth", float, 1e10, "all-reduce bandwidth w in bytes/s"),
    Key("buckets", "call_overhead_us", float, 50, "overhead o of one all-reduce call, in microseconds"),
    Key("pipeline", "stages", int, 6, "pipeline stages p; must divide [model].num_blocks"),
    Key("pipeline", "microbatches", int, 24, "micro-batches m per step"),
    Key("pipeline", "tokens_per_microbatch", int, 4096, "tokens (batch x sequence) of one micro-batch"),
    Key("pipeline", "chunks", int, 3,
        "model chunks v per stage in the interleaved schedule; p * v must divide [model].num_blocks"),
    Key("pipeline", "device", str, "H100", "device whose FLOP/s C times one stage's forward t_f",
        names="hardware"),
    Key("pipeline", "target_bubble_percent", int, 3,
        "bubble fraction (in percent) the fewest micro-batches must reach"),
    Key("grading", "require_walls", str, "isolated",
        "the least walls around student code that grading accepts (`shardlab walls` shows this machine's "
        "and what would give more): \"full\" every wall (own namespaces and private root, own cgroup, "
        "system-call filter); \"isolated\" student code cannot see your files (namespaces, or Landlock "
        "where user namespaces are refused; no cgroup needed); \"unsafe-none\" grade even where student "
        "code would run as your own user with your files in view. Below it, grading refuses in one line",
        WALL_REQUIREMENTS),
    Key("grading", "require_jail", bool, None,
        "the older form of require_walls, still read: true is \"full\", false is \"isolated\" (false "
        "once allowed no walls at all: that is now require_walls = \"unsafe-none\")"),
    Key("grading", "budget_seconds", int, 240,
        "wall-clock seconds one grading may spend running student code, all its calls and runs together; "
        "what is left when it runs out fails as 'did not finish'. Batch's and Gradescope's own timeouts "
        "sit above it (docs/trust.md, Deadlines): keep it well inside Gradescope's limit, 10 minutes by default"),
    Key("gradescope", "student_id_field", str, "email",
        "which field of Gradescope's submission metadata identifies a student: users[].email, or users[].id "
        "(Gradescope's numeric user id). When a roster's student ids are not that field's values, `build "
        "--roster` ships a map to them in the autograder zip (from the roster's email column); otherwise, "
        "and without a roster, the field's value is the student id itself",
        GRADESCOPE_ID_FIELDS),
    Key("gradescope", "test_visibility", str, "visible",
        "when students see each question's score and feedback on Gradescope: visible (at once), "
        "after_due_date, after_published or hidden. Feedback on hidden cases never shows their inputs "
        "or expected values, so visible is safe", VISIBILITIES),
    Key("gradescope", "stdout_visibility", str, "hidden",
        "when students see the grading run's standard output (otter's log and score table); "
        "hidden: instructors only", VISIBILITIES),
)

# A course's own devices and networks: [hardware.NAME] and [network.NAME] tables, usable wherever a
# preset's name is. Keys marked required have no default.
HARDWARE_KEYS: tuple[Key, ...] = (
    Key("hardware", "capacity_bytes", int, None, "HBM capacity in bytes (80e9 for 80 GB), required"),
    Key("hardware", "flops_per_second", float, None, "dense BF16 peak C in FLOP/s, required"),
    Key("hardware", "hbm_bytes_per_second", float, 0.0, "HBM bandwidth in bytes/s"),
    Key("hardware", "ici_bytes_per_second", float, 0.0,
        "bidirectional bandwidth of one inter-chip link W_ici in bytes/s (absent: no ICI, a GPU)"),
    Key("hardware", "ici_links", int, 0, "ICI links per chip (4 on a 2D torus, 6 on a 3D torus)"),
)
NETWORK_KEYS: tuple[Key, ...] = (
    Key("network", "alpha_seconds", float, None, "latency alpha of one hop, in seconds, required"),
    Key("network", "beta_bytes_per_second", float, None, "bandwidth beta per device, in bytes/s, required"),
    Key("network", "devices", int, 0, "devices it usually joins: the FSDP question's default p"),
)


def default_value(section: str, name: str) -> Any:
    """The default of the key [section].name, as SCHEMA gives it."""
    return next(k.default for k in SCHEMA if (k.section, k.name) == (section, name))


@dataclass(frozen=True)
class BucketsConfig:
    """The bucket question's cost model: s bytes, w bytes/s, o seconds per call."""

    model_bytes: int = 400_000_000
    bandwidth: float = 1e10
    call_overhead: float = 50e-6


@dataclass(frozen=True)
class FsdpConfig:
    """The FSDP overlap question: one layer of the course model as the unit,
    on `device`, over the lecture's intra-node and inter-node networks."""

    device: Hardware
    tokens_per_device: int
    intra: Network
    intra_devices: int
    inter: Network
    inter_devices: int


@dataclass(frozen=True)
class Mesh4D:
    """The 4D question's mesh: X-way FSDP times Y-way TP on `device`, N = X * Y."""

    device: Hardware
    x: int
    y: int
    m_x: int
    m_y: int
    overlap: bool = True

    @property
    def n(self) -> int:
        return self.x * self.y


@dataclass(frozen=True)
class PipelineConfig:
    """The pipeline question: p stages of the course model, m micro-batches of
    tokens_per_microbatch tokens, v chunks per stage when interleaved."""

    stages: int = 6
    microbatches: int = 24
    tokens_per_microbatch: int = 4096
    chunks: int = 3
    device: Hardware = HARDWARE["H100"]
    target_bubble_percent: int = 3

    def checked(self, num_blocks: int) -> PipelineConfig:
        """Itself, if the course model's blocks split evenly over stages and chunks."""
        if num_blocks % (self.stages * self.chunks):
            raise ShardlabError(f"config [pipeline].stages x chunks = {self.stages} x {self.chunks} must "
                                f"divide [model].num_blocks = {num_blocks}")
        return self


@dataclass(frozen=True)
class GradescopeConfig:
    """[gradescope]: which metadata field names a student, and what students see when."""

    student_id_field: str = "email"
    test_visibility: str = "visible"
    stdout_visibility: str = "hidden"


@dataclass(frozen=True)
class CourseConfig:
    course_name: str
    assignment_name: str
    seed: int
    model: ModelConfig
    tokens_per_device: int
    gpu: Hardware
    fsdp_device: Hardware
    mesh: Mesh4D
    fsdp: FsdpConfig
    buckets: BucketsConfig = BucketsConfig()
    pipeline: PipelineConfig = PipelineConfig()
    points: tuple[tuple[str, float], ...] = ()   # [points] overrides, (part id or question name, points)
    questions: tuple[str, ...] = ()              # [course] questions: module names; () = every question
    question_dirs: tuple[str, ...] = ()          # [course] question_dirs, absolute (`own_question_dirs`)
    scaffolding: str = default_value("course", "scaffolding")   # what the stubs ship (SCAFFOLDINGS)
    source: str = "default course (reference/course.toml)"
    secret: str = ""            # per-student variants and answers.toml grading when set
    answer_points: int = 1
    require_walls: str = "isolated"   # [grading]: the least walls grading accepts (WALL_REQUIREMENTS)
    budget_seconds: int = 240   # [grading]: one grading's wall clock for student code
    gradescope: GradescopeConfig = GradescopeConfig()
    sha256: str = ""            # of the config file's bytes: which course graded a report (`engine.grading`)
    # what a per-student variant draws ([variants], `Draw`); None: the default draw (`default_draws`)
    draws: tuple[Draw, ...] | None = None
    data_json: str = ""         # the parsed TOML, so a variant re-reads it with its own values (`with_values`)


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


FFN_RATIO = Key("model", "ffn_ratio", float, None, "F / D: d_ff drawn as d_model times this ratio")


def _table(section: str, name: str, table: Any, keys: tuple[Key, ...]) -> dict[str, Any]:
    """A [section.NAME] table's values by key, defaults filled, required keys present."""
    where = f"[{section}.\"{name}\"]"
    if not isinstance(table, dict):
        raise ShardlabError(f"config {where} must be a table")
    known = {k.name: k for k in keys}
    for key in table:
        if key not in known:
            raise ShardlabError(f"config has an unknown key {where}.{key} (known: {', '.join(known)})")
    out = {}
    for k in keys:
        if k.name in table:
            out[k.name] = k.check(table[k.name], f"{where}.{k.name}")
        elif k.default is None:
            raise ShardlabError(f"config {where} needs {k.name} ({k.description.removesuffix(', required')})")
        else:
            out[k.name] = k.default
    return out


def _own_tables(data: dict) -> tuple[dict[str, Hardware], dict[str, Network]]:
    """The presets plus the course's [hardware.NAME] and [network.NAME] tables."""
    hardware, networks = dict(HARDWARE), dict(NETWORKS)
    for section, presets in (("hardware", hardware), ("network", networks)):
        tables = data.get(section, {})
        if not isinstance(tables, dict):
            raise ShardlabError(f"config [{section}] must hold tables, e.g. [{section}.\"My name\"]")
        for name in tables:
            if name in presets:
                raise ShardlabError(f"config [{section}.\"{name}\"] redefines the preset {name!r}: give yours "
                                    "another name")
    for name, table in data.get("hardware", {}).items():
        hardware[name] = Hardware(name, **_table("hardware", name, table, HARDWARE_KEYS))
    for name, table in data.get("network", {}).items():
        v = _table("network", name, table, NETWORK_KEYS)
        networks[name] = Network(name, v["alpha_seconds"], v["beta_bytes_per_second"], v["devices"])
    return hardware, networks


def _named(key: Key, value: str, hardware: dict[str, Hardware], networks: dict[str, Network],
           where: str = "") -> Hardware | Network:
    """The device or network a key's value names (`Key.names`)."""
    where = where or key.where
    pool: dict[str, Any] = networks if key.names == "network" else hardware
    if key.names == "ici":
        pool = {n: h for n, h in hardware.items() if h.ici_bytes_per_second > 0}
    if value not in pool:
        what = {"network": "network", "ici": "device with ICI (ici_bytes_per_second)"}.get(key.names, "device")
        raise ShardlabError(f"config {where} = {value!r} names no {what}; known: "
                            f"{', '.join(map(repr, pool))} (or define [{'network' if what == 'network' else 'hardware'}"
                            f".\"{value}\"])")
    return pool[value]


def _draws(table: Any, questions: tuple[str, ...], hardware, networks) -> tuple[Draw, ...]:
    """[variants]: `section.key = [choices]` or `{ min = .., max = .., step = .. }` per drawn key."""
    if not isinstance(table, dict):
        raise ShardlabError("config [variants] must be a table")
    known = {f"{k.section}.{k.name}": k for k in SCHEMA if k.section == "model" or k.section in QUESTION_SECTIONS}
    known["model.ffn_ratio"] = FFN_RATIO
    flat = {f"{section}.{name}": spec for section, sub in table.items()
            for name, spec in (sub.items() if isinstance(sub, dict) else [("", sub)])}
    draws = []
    for name, spec in flat.items():
        where = f"[variants] {name}"
        key = known.get(name)
        if key is None or key.name == "name":
            raise ShardlabError(f"config {where} is no key a variant can draw (drawn: section.key of "
                                f"[model] or a question's section, e.g. model.d_model, memory.gpu)")
        if key.section != "model" and questions and key.section not in questions:
            raise ShardlabError(f"config {where} draws for question {key.section!r}, which this course does not "
                                f"set ([course] questions = {list(questions)})")
        if isinstance(spec, list):
            if not spec:
                raise ShardlabError(f"config {where} is an empty list: nothing to draw from")
            choices = tuple(key.check(v, f"{where}[{i}]") for i, v in enumerate(spec))
            if key.names:
                for c in choices:
                    _named(key, c, hardware, networks, where)
            draws.append(Draw(name, choices))
        elif isinstance(spec, dict) and key.kind in (int, float):
            extra = set(spec) - {"min", "max", "step"}
            if extra or not {"min", "max"} <= set(spec):
                raise ShardlabError(f"config {where} must be a list or {{ min = .., max = .., step = .. }}")
            lo, hi = (key.check(spec[b], f"{where}.{b}") for b in ("min", "max"))
            step = key.check(spec.get("step", 1), f"{where}.step")
            if lo > hi:
                raise ShardlabError(f"config {where} has min {lo} > max {hi}: nothing to draw from")
            draws.append(Draw(name, (), lo, hi, step))
        else:
            raise ShardlabError(f"config {where} must be a list of values"
                                + (" or { min = .., max = .., step = .. }" if key.kind in (int, float) else "")
                                + f", got {spec!r}")
    if "model.ffn_ratio" in flat and "model.d_ff" in flat:
        raise ShardlabError("config [variants] draws both model.d_ff and model.ffn_ratio: draw one")
    return tuple(draws)


def _required_walls(walls: str, old_boolean: bool | None, walls_given: bool) -> str:
    """[grading] require_walls, or its older boolean form require_jail (true: full, false: isolated)."""
    if old_boolean is None:
        return walls
    if walls_given:
        raise ShardlabError("config [grading] sets both require_walls and require_jail (its older form): "
                            "keep require_walls")
    return "full" if old_boolean else "isolated"


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


def _parse(data: dict, source: str, sha256: str = "", base: Path | None = None) -> CourseConfig:
    known = {(k.section, k.name): k for k in SCHEMA}
    sections = {k.section for k in SCHEMA} | {"points", "hardware", "network", "variants"}
    values: dict[tuple[str, str], Any] = {key: k.default for key, k in known.items()}
    hardware, networks = _own_tables(data)
    for section, table in data.items():
        if section not in sections:
            raise ShardlabError(f"config has an unknown section [{section}] "
                                f"(known: {', '.join(sorted(sections))})")
        if not isinstance(table, dict):
            raise ShardlabError(f"config [{section}] must be a table")
        if section in ("points", "hardware", "network", "variants"):
            continue
        for name, value in table.items():
            if (section, name) not in known:
                names = sorted(k.name for k in SCHEMA if k.section == section)
                raise ShardlabError(f"config has an unknown key [{section}].{name} "
                                    f"(known: {', '.join(names)})")
            values[(section, name)] = known[(section, name)].check(value)
    questions = values[("course", "questions")]
    points = {}
    for part_id, value in data.get("points", {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ShardlabError(f"config [points].\"{part_id}\" must be a number >= 0, got {value!r}")
        points[str(part_id)] = float(value)
    v = lambda s, n: values[(s, n)]  # noqa: E731

    def named(section: str, name: str) -> Any:
        return _named(known[(section, name)], v(section, name), hardware, networks)
    intra, inter = named("fsdp", "intra_network"), named("fsdp", "inter_network")
    devices = {}
    for side, network in (("intra", intra), ("inter", inter)):
        devices[side] = v("fsdp", f"{side}_devices") or network.devices
        if not devices[side]:
            raise ShardlabError(f"config [fsdp].{side}_devices is needed: network {network.name!r} names "
                                "no devices")
    pipeline = PipelineConfig(v("pipeline", "stages"), v("pipeline", "microbatches"),
                              v("pipeline", "tokens_per_microbatch"), v("pipeline", "chunks"),
                              named("pipeline", "device"), v("pipeline", "target_bubble_percent"))
    if not questions or "pipeline" in questions:      # its rule binds only a course that sets it
        pipeline = pipeline.checked(v("model", "num_blocks"))
    return CourseConfig(
        course_name=v("course", "name"),
        assignment_name=v("course", "assignment"),
        seed=v("course", "seed"),
        model=ModelConfig(v("model", "name"), v("model", "d_model"), v("model", "d_ff"),
                          v("model", "num_blocks")),
        tokens_per_device=v("memory", "tokens_per_device"),
        gpu=named("memory", "gpu"),
        fsdp_device=named("memory", "fsdp_device"),
        fsdp=FsdpConfig(named("fsdp", "device"), v("fsdp", "tokens_per_device"),
                        intra, devices["intra"], inter, devices["inter"]),
        mesh=Mesh4D(named("comm4d", "device"), v("comm4d", "x"), v("comm4d", "y"),
                    v("comm4d", "m_x"), v("comm4d", "m_y"), v("comm4d", "overlap")),
        buckets=BucketsConfig(v("buckets", "model_bytes"), v("buckets", "bandwidth"),
                              v("buckets", "call_overhead_us") / 1e6),
        pipeline=pipeline,
        points=tuple(sorted(points.items())),
        questions=questions,
        question_dirs=own_question_dirs(values[("course", "question_dirs")], base),
        scaffolding=v("course", "scaffolding"),
        source=source,
        secret=v("course", "secret"),
        answer_points=v("course", "answer_points"),
        require_walls=_required_walls(v("grading", "require_walls"), v("grading", "require_jail"),
                                      "require_walls" in data.get("grading", {})),
        budget_seconds=v("grading", "budget_seconds"),
        gradescope=GradescopeConfig(v("gradescope", "student_id_field"), v("gradescope", "test_visibility"),
                                    v("gradescope", "stdout_visibility")),
        sha256=sha256,
        draws=_draws(data["variants"], questions, hardware, networks) if "variants" in data else None,
        data_json=json.dumps(data, sort_keys=True, default=str),
    )


def with_values(cfg: CourseConfig, values: dict[str, Any]) -> CourseConfig:
    """The course with some keys replaced ({"model.d_model": 8192, ...}), read
    again as a whole, so every check of the config holds for the result
    (a ShardlabError names what does not). Only the exercise's numbers change:
    the course's name, secret, points and settings stay `cfg`'s own."""
    data = json.loads(cfg.data_json) if cfg.data_json else {}
    data.pop("variants", None)
    for dotted, value in values.items():
        section, name = dotted.split(".")
        data.setdefault(section, {})[name] = value
    fresh = _parse(data, cfg.source)
    return dataclasses.replace(cfg, model=fresh.model, tokens_per_device=fresh.tokens_per_device, gpu=fresh.gpu,
                               fsdp_device=fresh.fsdp_device, mesh=fresh.mesh, fsdp=fresh.fsdp,
                               buckets=fresh.buckets, pipeline=fresh.pipeline)


def default_draws(cfg: CourseConfig) -> tuple[Draw, ...]:
    """Without [variants]: the model's d_model and d_ff within ±25 % of the
    course's, in multiples of 128, and num_blocks within ±25 %; everything else
    stays the course's."""
    m = cfg.model
    widths = [Draw(f"model.{k}", (), 128 * max(1, math.ceil(0.75 * w / 128)),
                   128 * max(1, math.floor(1.25 * w / 128)), 128)
              for k, w in (("d_model", m.d_model), ("d_ff", m.d_ff))]
    return (*widths, Draw("model.num_blocks", (), max(1, math.ceil(0.75 * m.num_blocks)),
                          max(1, math.floor(1.25 * m.num_blocks)), 1))



def load_config(path: str | Path | None = None) -> CourseConfig:
    """Read a course config; None means the shipped default course."""
    if path is None:
        raw = resources.files("shardlab.reference").joinpath("course.toml").read_bytes()
        return _parse(tomllib.loads(raw.decode()), "default course (reference/course.toml)",
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
