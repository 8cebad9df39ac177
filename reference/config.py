"""The course config: one TOML file, every key described here once.

`load_config(None)` gives the default course (reference/course.toml, the XXL
problem); `load_config(path)` reads an instructor's copy. Unknown keys, wrong
types and impossible values are errors that name the key.
"""
from __future__ import annotations

import hashlib
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from shardlab.autograder.core.errors import ShardlabError
from shardlab.reference.specs import HARDWARE, NETWORKS, Hardware, ModelConfig, Network


@dataclass(frozen=True)
class Key:
    section: str
    name: str
    kind: type
    default: Any
    description: str
    choices: tuple = ()

    def check(self, value: Any) -> Any:
        where = f"[{self.section}].{self.name}"
        if self.kind is int and (isinstance(value, bool) or not isinstance(value, int)):
            raise ShardlabError(f"config {where} must be an integer, got {value!r}")
        if self.kind is str and not isinstance(value, str):
            raise ShardlabError(f"config {where} must be a string, got {value!r}")
        if self.kind is tuple and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ShardlabError(f"config {where} must be a list of strings, got {value!r}")
        if self.kind is bool and not isinstance(value, bool):
            raise ShardlabError(f"config {where} must be true or false, got {value!r}")
        if self.kind is int and value <= 0 and self.name != "seed":
            raise ShardlabError(f"config {where} must be positive, got {value}")
        if self.choices and value not in self.choices:
            raise ShardlabError(
                f"config {where} must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
        return tuple(value) if self.kind is tuple else value


_DEVICES = tuple(HARDWARE)
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")   # Gradescope's results.json
GRADESCOPE_ID_FIELDS = ("email", "id")    # the documented users[] fields of submission_metadata.json
_ICI_DEVICES = tuple(name for name, h in HARDWARE.items() if h.ici_bytes_per_second > 0)

SCHEMA: tuple[Key, ...] = (
    Key("course", "name", str, "Systems for Large Models", "course name shown on handouts"),
    Key("course", "assignment", str, "Assignment 2: Memory, FSDP, 4D parallelism and DDP buckets",
        "assignment title shown on handouts"),
    Key("course", "seed", int, 20261122, "seed of the generated public and hidden test cases"),
    Key("course", "secret", str, "",
        "course secret that, with a student id, seeds per-student variants (`build --roster`) "
        "and turns on grading answers.toml; empty: no variants"),
    Key("course", "questions", tuple, (),
        "the questions this course sets, by module name (\"memory\", \"fsdp\", \"comm4d\", \"buckets\", "
        "\"pipeline\"); handouts, solutions, the starter kit, the otter zip and grading follow it. "
        "Empty or absent: every question"),
    Key("course", "answer_points", int, 1,
        "points per question for the handout numbers in answers.toml (only with a secret)"),
    Key("model", "name", str, "XXL", "the model's name in the handout"),
    Key("model", "d_model", int, 16384, "model width D"),
    Key("model", "d_ff", int, 53248, "FFN hidden width F"),
    Key("model", "num_blocks", int, 126, "number of FFN blocks L"),
    Key("memory", "tokens_per_device", int, 4096,
        "tokens (batch x sequence) one device processes, for the activation memory"),
    Key("memory", "gpu", str, "H100", "device counted in part (a)", _DEVICES),
    Key("memory", "fsdp_device", str, "TPU v5p", "device one FSDP shard must fit in part (b)", _DEVICES),
    Key("fsdp", "device", str, "H100", "device whose FLOP/s C runs one FSDP unit's forward", _DEVICES),
    Key("fsdp", "tokens_per_device", int, 4096, "tokens per device in the FSDP overlap question"),
    Key("fsdp", "intra_devices", int, 8, "devices p sharding over the intra-node network"),
    Key("fsdp", "inter_devices", int, 64, "devices p sharding over the inter-node network"),
    Key("comm4d", "device", str, "TPU v5p", "chip of the 4D mesh: its C and W_ici", _ICI_DEVICES),
    Key("comm4d", "x", int, 16, "FSDP (data) degree X"),
    Key("comm4d", "y", int, 4, "tensor-parallel degree Y"),
    Key("comm4d", "m_x", int, 2, "mesh axes M_X the X collectives use"),
    Key("comm4d", "m_y", int, 1, "mesh axes M_Y the Y collectives use"),
    Key("comm4d", "overlap", bool, True,
        "comms overlap compute, so the binding term is max(FSDP, TP); false sums them"),
    Key("buckets", "model_bytes", int, 400_000_000,
        "bytes s of gradients DDP all-reduces per step in the bucket question (100M FP32 parameters)"),
    Key("buckets", "bandwidth", int, 10_000_000_000, "all-reduce bandwidth w in bytes/s"),
    Key("buckets", "call_overhead_us", int, 50, "overhead o of one all-reduce call, in microseconds"),
    Key("pipeline", "stages", int, 6, "pipeline stages p; must divide [model].num_blocks"),
    Key("pipeline", "microbatches", int, 24, "micro-batches m per step"),
    Key("pipeline", "tokens_per_microbatch", int, 4096, "tokens (batch x sequence) of one micro-batch"),
    Key("pipeline", "chunks", int, 3,
        "model chunks v per stage in the interleaved schedule; p * v must divide [model].num_blocks"),
    Key("pipeline", "device", str, "H100", "device whose FLOP/s C times one stage's forward t_f", _DEVICES),
    Key("pipeline", "target_bubble_percent", int, 3,
        "bubble fraction (in percent) the fewest micro-batches must reach"),
    Key("grading", "require_jail", bool, False,
        "refuse to grade unless every wall of the jail is up (namespaces, private root, cgroup); "
        "false: grade with the lighter walls and say so in every report"),
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
    source: str = "default course (reference/course.toml)"
    secret: str = ""            # per-student variants and answers.toml grading when set
    answer_points: int = 1
    require_jail: bool = False  # [grading]: refuse to grade without the full jail
    gradescope: GradescopeConfig = GradescopeConfig()
    sha256: str = ""            # of the config file's bytes: which course graded a report (`engine.grading`)


def _parse(data: dict, source: str, sha256: str = "") -> CourseConfig:
    known = {(k.section, k.name): k for k in SCHEMA}
    sections = {k.section for k in SCHEMA} | {"points"}
    values: dict[tuple[str, str], Any] = {key: k.default for key, k in known.items()}
    for section, table in data.items():
        if section not in sections:
            raise ShardlabError(f"config has an unknown section [{section}] "
                                f"(known: {', '.join(sorted(sections))})")
        if not isinstance(table, dict):
            raise ShardlabError(f"config [{section}] must be a table")
        if section == "points":
            continue
        for name, value in table.items():
            if (section, name) not in known:
                names = sorted(k.name for k in SCHEMA if k.section == section)
                raise ShardlabError(f"config has an unknown key [{section}].{name} "
                                    f"(known: {', '.join(names)})")
            values[(section, name)] = known[(section, name)].check(value)
    points = {}
    for part_id, value in data.get("points", {}).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ShardlabError(f"config [points].\"{part_id}\" must be a number >= 0, got {value!r}")
        points[str(part_id)] = float(value)
    v = lambda s, n: values[(s, n)]  # noqa: E731
    return CourseConfig(
        course_name=v("course", "name"),
        assignment_name=v("course", "assignment"),
        seed=v("course", "seed"),
        model=ModelConfig(v("model", "name"), v("model", "d_model"), v("model", "d_ff"),
                          v("model", "num_blocks")),
        tokens_per_device=v("memory", "tokens_per_device"),
        gpu=HARDWARE[v("memory", "gpu")],
        fsdp_device=HARDWARE[v("memory", "fsdp_device")],
        fsdp=FsdpConfig(HARDWARE[v("fsdp", "device")], v("fsdp", "tokens_per_device"),
                        NETWORKS["intra-node"], v("fsdp", "intra_devices"),
                        NETWORKS["inter-node"], v("fsdp", "inter_devices")),
        mesh=Mesh4D(HARDWARE[v("comm4d", "device")], v("comm4d", "x"), v("comm4d", "y"),
                    v("comm4d", "m_x"), v("comm4d", "m_y"), v("comm4d", "overlap")),
        buckets=BucketsConfig(v("buckets", "model_bytes"), float(v("buckets", "bandwidth")),
                              v("buckets", "call_overhead_us") / 1e6),
        pipeline=PipelineConfig(v("pipeline", "stages"), v("pipeline", "microbatches"),
                                v("pipeline", "tokens_per_microbatch"), v("pipeline", "chunks"),
                                HARDWARE[v("pipeline", "device")],
                                v("pipeline", "target_bubble_percent")).checked(v("model", "num_blocks")),
        points=tuple(sorted(points.items())),
        questions=v("course", "questions"),
        source=source,
        secret=v("course", "secret"),
        answer_points=v("course", "answer_points"),
        require_jail=v("grading", "require_jail"),
        gradescope=GradescopeConfig(v("gradescope", "student_id_field"), v("gradescope", "test_visibility"),
                                    v("gradescope", "stdout_visibility")),
        sha256=sha256,
    )


def load_config(path: str | Path | None = None) -> CourseConfig:
    """Read a course config; None means the shipped default course."""
    if path is None:
        raw = resources.files("shardlab.reference").joinpath("course.toml").read_bytes()
        return _parse(tomllib.loads(raw.decode()), "default course (reference/course.toml)",
                      hashlib.sha256(raw).hexdigest())
    path = Path(path)
    if not path.is_file():
        raise ShardlabError(f"config file not found: {path}")
    raw = path.read_bytes()
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ShardlabError(f"config {path} is not valid TOML: {(str(exc) or type(exc).__name__).splitlines()[0]}") from None
    return _parse(data, str(path), hashlib.sha256(raw).hexdigest())
