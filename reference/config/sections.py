"""Every key of a course config, declared once: one pydantic model per TOML
section, one field per key (its kind from `fields`, its default, unit,
allowed range and one line of help). Reading, the config reference
(docs/config.md, `config.docs`) and a `[variants]` draw all follow from
these declarations. A course's own question declares its section the same
way, in its folder (`config.own`).

Adding a setting is adding one field here; the code reads it as
`cfg.<section>.<key>` (`config.course.CourseConfig`).
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator

from shardlab.autograder.core.errors import ShardlabError
from shardlab.reference.config.renamed import Renamed
from shardlab.reference.config.fields import (Device, Flag, IciDevice, Names, NetworkName, Number, OneOf,
                                              OptionalFlag, Text, Whole, one_line, setting)
from shardlab.reference.specs import Hardware, Network

VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")   # Gradescope's results.json
GRADESCOPE_ID_FIELDS = ("email", "id")    # the documented users[] fields of submission_metadata.json
WALL_REQUIREMENTS = ("full", "isolated", "unsafe-none")   # [grading] require_walls (`sandbox.walls`)
SCAFFOLDINGS = ("blank", "guided")        # how much of a design the stubs ship (publish.stubs)


class Section(BaseModel):
    """One TOML section: its keys are the fields; unknown keys are errors; read-only once read. A
    subclass's docstring's first line is the section's line in the config reference."""

    model_config = ConfigDict(extra="forbid", frozen=True, ignored_types=(Renamed,))


class CourseSection(Section):
    """[course]: the course's names, seeds and secret, and which questions it sets."""

    name: Text = setting("Systems for Large Models", "course name shown on handouts")
    assignment: Text = setting("Assignment 2: Memory, FSDP, 4D parallelism, DDP buckets and pipelines",
                               "assignment title shown on handouts")
    seed: Whole = setting(20261122, "seed of the generated public and hidden test cases")
    secret: Text = setting(
        "", "course secret that, with a student id, seeds per-student variants (`build --roster`, drawn as "
        "[variants] says) and turns on grading answers.toml; empty: no variants")
    questions: Names = setting(
        (), "the questions this course sets, by module name (\"memory\", \"fsdp\", \"comm4d\", \"buckets\", "
        "\"pipeline\"); handouts, solutions, the starter kit, the otter zip and grading follow it. "
        "Empty or absent: every question")
    question_dirs: Names = setting(
        (), "folders of this course's own questions, relative to this config file: each sub-folder is one "
        "question (question.py, reference.py, solution.py, template.md.j2; scenario.py and checks.py for a "
        "distributed part; config.py for a section of its own; ARCHITECTURE.md, \"Adding a question\"). They "
        "join the package's questions everywhere; [course] questions may name them. Empty: the package's "
        "questions only")
    answer_points: Whole = setting(1, "points per question for the handout numbers in answers.toml (only with "
                                   "a secret)", unit="points", gt=0)
    scaffolding: Annotated[str, OneOf(SCAFFOLDINGS)] = setting(
        "blank", "what the stubs of the starter kit ship besides each graded function's and class's signature, "
        "task id, units and contract: \"blank\" nothing (the student designs every helper); \"guided\" also the "
        "solutions' hints (docstring paragraphs starting \"Hint:\") and their private helpers as a stubbed "
        "skeleton (`# BEGIN SCAFFOLD` blocks). Neither answers what the handout asks to derive")


class ModelSection(Section):
    """[model]: the exercise's FFN-only transformer (`specs.ModelConfig`)."""

    name: Text = setting("XXL", "the model's name in the handout")
    d_model: Whole = setting(16384, "model width D", unit="features", gt=0)
    d_ff: Whole = setting(53248, "FFN hidden width F", unit="features", gt=0)
    num_blocks: Whole = setting(126, "number of FFN blocks L", unit="blocks", gt=0)


class MemorySection(Section):
    """[memory]: question 1, memory accounting."""

    tokens_per_device: Whole = setting(4096, "tokens (batch x sequence) one device processes, for the "
                                       "activation memory", unit="tokens", gt=0)
    gpu: Device = setting("H100", "device counted in part (a)", named=True)
    fsdp_device: Device = setting("TPU v5p", "device one FSDP shard must fit in part (b)", named=True)


class FsdpSection(Section):
    """[fsdp]: question 2, FSDP's communication against its compute."""

    device: Device = setting("H100", "device whose FLOP/s C runs one FSDP unit's forward", named=True)
    tokens_per_device: Whole = setting(4096, "tokens per device in the FSDP overlap question", unit="tokens",
                                       gt=0)
    intra_network: NetworkName = setting("intra-node", "the network within one node (its alpha and beta)",
                                         named=True)
    intra_devices: Whole = setting(None, "devices p sharding over the intra-node network (default: that "
                                   "network's devices)", unit="devices", gt=0)
    inter_network: NetworkName = setting("inter-node", "the network across nodes", named=True)
    inter_devices: Whole = setting(None, "devices p sharding over the inter-node network (default: that "
                                   "network's devices)", unit="devices", gt=0)

    @model_validator(mode="before")
    @classmethod
    def _devices_of_the_networks(cls, data: Any, info: ValidationInfo) -> Any:
        """An absent *_devices is its network's `devices`; a network that names none needs it set."""
        data = dict(data)
        for side in ("intra", "inter"):
            name = data.get(f"{side}_network", cls.model_fields[f"{side}_network"].default)
            network = (info.context or {})["networks"].get(name) if isinstance(name, str) else None
            if data.get(f"{side}_devices") is not None or network is None:
                continue
            if not network.devices:
                raise ShardlabError(f"config [fsdp].{side}_devices is needed: network {network.name!r} names "
                                    "no devices")
            data[f"{side}_devices"] = network.devices
        return data

    intra = Renamed("intra_network", "cfg.fsdp")     # the names of earlier releases (`config.renamed`)
    inter = Renamed("inter_network", "cfg.fsdp")


class Comm4dSection(Section):
    """[comm4d]: question 3, the communication of X-way FSDP times Y-way TP on a mesh of chips."""

    device: IciDevice = setting("TPU v5p", "chip of the 4D mesh: its C and W_ici", named=True)
    x: Whole = setting(16, "FSDP (data) degree X (1: no FSDP, whose collectives cost nothing; `build` names "
                       "it degenerate)", unit="devices", gt=0)
    y: Whole = setting(4, "tensor-parallel degree Y (1: no tensor parallelism, named likewise)", unit="devices",
                       gt=0)
    m_x: Whole = setting(2, "mesh axes M_X the X collectives use; M_X + M_Y at most the axes of the chip's torus "
                         "(ici_links / 2: 3 on a TPU v5p, 2 on a v5e)", unit="axes", gt=0)
    m_y: Whole = setting(1, "mesh axes M_Y the Y collectives use (M_X + M_Y as above)", unit="axes", gt=0)
    overlap: Flag = setting(True, "comms overlap compute, so the binding term is max(FSDP, TP); false sums them")

    @property
    def n(self) -> int:
        """Devices of the mesh, N = X * Y."""
        return self.x * self.y

    def checked(self) -> Comm4dSection:
        """Itself, if its chip's torus holds the mesh: the X and Y collectives run over M_X + M_Y distinct
        axes of the chip's ICI torus (`Hardware.torus_axes`: 3 on a v5p, 2 on a v5e), so M_X + M_Y may not
        exceed them (docs/spec.md, question 3). One line names the keys otherwise."""
        chip = self.device
        if self.m_x + self.m_y > chip.torus_axes:
            raise ShardlabError(
                f"config [comm4d].m_x + m_y = {self.m_x} + {self.m_y} mesh axes exceed the {chip.torus_axes} axes "
                f"of {chip.name}'s torus (ici_links = {chip.ici_links}, two per axis): lower m_x or m_y"
                + (", or give the chip its ici_links" if not chip.ici_links else ""))
        return self


class BucketsSection(Section):
    """[buckets]: question 4, DDP's gradient buckets: s bytes, w bytes/s, o per call."""

    model_bytes: Whole = setting(400_000_000, "bytes s of gradients DDP all-reduces per step in the bucket "
                                 "question (100M FP32 parameters)", unit="bytes", gt=0)
    bandwidth: Number = setting(1e10, "all-reduce bandwidth w", unit="bytes/s", gt=0)
    call_overhead_us: Number = setting(50.0, "overhead o of one all-reduce call", unit="microseconds", gt=0)

    @property
    def call_overhead_seconds(self) -> float:
        """o in seconds: call_overhead_us / 1e6."""
        return self.call_overhead_us / 1e6

    call_overhead = Renamed("call_overhead_seconds", "cfg.buckets")   # seconds, as earlier releases named it


class PipelineSection(Section):
    """[pipeline]: question 5, p stages of the course model, m micro-batches, v chunks per stage."""

    stages: Whole = setting(6, "pipeline stages p; must divide [model].num_blocks", unit="stages", gt=0)
    microbatches: Whole = setting(24, "micro-batches m per step", unit="micro-batches", gt=0)
    tokens_per_microbatch: Whole = setting(4096, "tokens (batch x sequence) of one micro-batch", unit="tokens",
                                           gt=0)
    chunks: Whole = setting(3, "model chunks v per stage in the interleaved schedule; p * v must divide "
                            "[model].num_blocks", unit="chunks", gt=0)
    device: Device = setting("H100", "device whose FLOP/s C times one stage's forward t_f", named=True)
    target_bubble_percent: Whole = setting(3, "bubble fraction the fewest micro-batches must reach",
                                           unit="percent", gt=0)

    def checked(self, num_blocks: int) -> PipelineSection:
        """Itself, if the course model's blocks split evenly over stages and chunks."""
        if num_blocks % (self.stages * self.chunks):
            raise ShardlabError(f"config [pipeline].stages x chunks = {self.stages} x {self.chunks} must "
                                f"divide [model].num_blocks = {num_blocks}")
        return self


class GradingSection(Section):
    """[grading]: the walls around student code and one grading's time."""

    require_walls: Annotated[str, OneOf(WALL_REQUIREMENTS)] = setting(
        "isolated", "the least walls around student code that grading accepts (`shardlab walls` shows this "
        "machine's and what would give more): \"full\" every wall (own namespaces and private root, own "
        "cgroup, system-call filter); \"isolated\" student code cannot see your files (namespaces, or Landlock "
        "where user namespaces are refused; no cgroup needed); \"unsafe-none\" grade even where student code "
        "would run as your own user with your files in view. Below it, grading refuses in one line")
    require_jail: OptionalFlag = setting(
        None, "the older form of require_walls, still read: true is \"full\", false is \"isolated\" (false "
        "once allowed no walls at all: that is now require_walls = \"unsafe-none\")")
    budget_seconds: Whole = setting(
        240, "wall-clock seconds one grading may spend running student code, all its calls and runs "
        "together; what is left when it runs out fails as 'did not finish'. Batch's and Gradescope's own "
        "timeouts sit above it (docs/trust.md, Deadlines): keep it well inside Gradescope's limit, 10 minutes "
        "by default", unit="seconds", gt=0)

    @model_validator(mode="after")
    def _older_form(self) -> GradingSection:
        """require_jail, when given, says what require_walls says (true: full, false: isolated)."""
        if self.require_jail is None:
            return self
        if "require_walls" in self.model_fields_set:
            raise ShardlabError("config [grading] sets both require_walls and require_jail (its older form): "
                                "keep require_walls")
        return self.model_copy(update={"require_walls": "full" if self.require_jail else "isolated"})


class GradescopeSection(Section):
    """[gradescope]: which metadata field names a student, and what students see when."""

    student_id_field: Annotated[str, OneOf(GRADESCOPE_ID_FIELDS)] = setting(
        "email", "which field of Gradescope's submission metadata identifies a student: users[].email, or "
        "users[].id (Gradescope's numeric user id). When a roster's student ids are not that field's values, "
        "`build --roster` ships a map to them in the autograder zip (from the roster's email column); "
        "otherwise, and without a roster, the field's value is the student id itself")
    test_visibility: Annotated[str, OneOf(VISIBILITIES)] = setting(
        "visible", "when students see each question's score and feedback on Gradescope: visible (at once), "
        "after_due_date, after_published or hidden. Feedback on hidden cases never shows their inputs or "
        "expected values, so visible is safe")
    stdout_visibility: Annotated[str, OneOf(VISIBILITIES)] = setting(
        "hidden", "when students see the grading run's standard output (otter's log and score table); hidden: "
        "instructors only")


class HardwareTable(Section):
    """[hardware.NAME]: a device of the course's own, usable wherever a preset's name is."""

    capacity_bytes: Whole = setting(..., "HBM capacity (80e9 for 80 GB)", unit="bytes", gt=0,
                                    plausible=(1e9, 1e12, "between 1 GB and 1 TB, as accelerators hold"))
    flops_per_second: Number = setting(..., "dense BF16 peak C", unit="FLOP/s", gt=0,
                                       plausible=(1e12, 1e16, "between 1 TFLOP/s and 10 PFLOP/s, as chips reach"))
    hbm_bytes_per_second: Number = setting(0.0, "HBM bandwidth (0: unknown; no question reads it yet)",
                                           unit="bytes/s", ge=0)
    ici_bytes_per_second: Number = setting(0.0, "bidirectional bandwidth of one inter-chip link W_ici (0: no "
                                           "ICI, a GPU)", unit="bytes/s", ge=0)
    ici_links: Whole = setting(0, "ICI links per chip (4 on a 2D torus, 6 on a 3D torus; 0: no ICI)",
                               unit="links", ge=0)

    def named(self, name: str) -> Hardware:
        return Hardware(name, **self.model_dump())


class NetworkTable(Section):
    """[network.NAME]: a network of the course's own, for [fsdp]'s intra_network and inter_network."""

    alpha_seconds: Number = setting(..., "latency alpha of one hop", unit="seconds", gt=0,
                                    plausible=(1e-7, 1e-2, "between 0.1 µs and 10 ms, as networks have"))
    beta_bytes_per_second: Number = setting(..., "bandwidth beta per device", unit="bytes/s", gt=0,
                                            plausible=(1e8, 1e13, "between 100 MB/s and 10 TB/s, as links carry"))
    devices: Whole = setting(0, "devices it usually joins: the FSDP question's default p (absent: 0, "
                            "none: then [fsdp] sets its *_devices)", unit="devices", gt=0)

    def named(self, name: str) -> Network:
        return Network(name, self.alpha_seconds, self.beta_bytes_per_second, self.devices)


# the package's sections, in the config file's order; a question's section is named after its module
SECTIONS: dict[str, type[Section]] = {
    "course": CourseSection, "model": ModelSection, "memory": MemorySection, "fsdp": FsdpSection,
    "comm4d": Comm4dSection, "buckets": BucketsSection, "pipeline": PipelineSection,
    "grading": GradingSection, "gradescope": GradescopeSection,
}
QUESTION_SECTIONS = ("memory", "fsdp", "comm4d", "buckets", "pipeline")    # a section per question module
TABLES: dict[str, type[Section]] = {"hardware": HardwareTable, "network": NetworkTable}


def read(model: type[Section], table: Any, where: str, context: dict[str, Any]) -> Section:
    """The section `table` as `model` declares it, or a one-line error naming the key (`where` is the
    section's: "[memory]", "[hardware.\"X\"]")."""
    if not isinstance(table, dict):
        raise ShardlabError(f"config {where} must be a table")
    known = model.model_fields
    for key in table:
        if key not in known:
            raise ShardlabError(f"config has an unknown key {where}.{key} (known: {', '.join(known)})")
    missing = [k for k, f in known.items() if f.is_required() and k not in table]
    if missing:
        help = known[missing[0]].description or ""
        unit = (known[missing[0]].json_schema_extra or {}).get("unit", "")   # type: ignore[union-attr]
        raise ShardlabError(f"config {where} needs {missing[0]} ({help}{', in ' + str(unit) if unit else ''})")
    try:
        return model.model_validate(table, context=context)
    except ValidationError as error:
        raise ShardlabError(one_line(error, lambda loc: f"{where}.{loc[0]}" if loc else where)) from None
