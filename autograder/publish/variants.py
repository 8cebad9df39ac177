"""Per-student variants: each student's own numbers, from a generator seeded
by the student id and the course secret (`[course].secret`).

The engine seeds; the variant only draws config values within realistic
ranges and hands them to the reference, so a variant's handout, answer key
and answers.toml grading all come from the same `CourseConfig`. Same id, same
variant; no secret, no variants (everyone has the course config).
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import hmac
import random
import re
from pathlib import Path

from shardlab.autograder.errors import ShardlabError
from shardlab.autograder.sandbox.untrusted import one_line
from shardlab.reference import comm4d, memory
from shardlab.reference.config import BucketsConfig, CourseConfig, FsdpConfig, Mesh4D
from shardlab.reference.specs import HARDWARE, ModelConfig

ROSTER_COLUMNS = ("student_id", "name")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")   # also a safe folder name
_GPUS = [h for h in HARDWARE.values() if h.flops_per_second and not h.ici_bytes_per_second]
_ICI = [h for h in HARDWARE.values() if h.ici_bytes_per_second]


def variant_seed(secret: str, student_id: str) -> str:
    """A keyed hash: without the secret, an id says nothing about its numbers."""
    return hmac.new(secret.encode(), student_id.encode(), hashlib.sha256).hexdigest()


def _draw(cfg: CourseConfig, rng: random.Random) -> CourseConfig:
    d = 128 * rng.randint(24, 160)                      # d_model 3,072 .. 20,480
    f = 128 * round(3.25 * d / 128)                     # d_ff ~ 3.25 d_model
    chips = rng.choice([64, 128, 256])
    y = rng.choice([2, 4, 8])                           # x * y = chips: both divide it
    m_x = rng.choice([1, 2])
    return dataclasses.replace(
        cfg,
        model=ModelConfig(cfg.model.name, d, f, rng.randint(32, 160)),
        tokens_per_device=rng.choice([1024, 2048, 4096, 8192]),
        gpu=rng.choice(_GPUS),
        fsdp_device=rng.choice(list(HARDWARE.values())),
        fsdp=FsdpConfig(rng.choice(_GPUS), rng.choice([2048, 4096, 8192]), cfg.fsdp.intra,
                        rng.choice([4, 8]), cfg.fsdp.inter, rng.choice([16, 32, 64, 128])),
        mesh=Mesh4D(rng.choice(_ICI), chips // y, y, m_x, rng.choice([1, 3 - m_x]), cfg.mesh.overlap),
        buckets=BucketsConfig(4 * 10**6 * rng.randint(10, 250), float(rng.choice([5, 10, 25, 50]) * 10**9),
                              rng.randint(20, 120) / 1e6),
    )


def _sensible(cfg: CourseConfig) -> bool:
    """Every handout question has an answer: FSDP fits a device, the mesh can be compute bound."""
    m = cfg.model
    state = memory.training_state_bytes(memory.param_count(m.d_model, m.d_ff, m.num_blocks))
    act = memory.activation_bytes(m.d_model, m.d_ff, m.num_blocks, cfg.tokens_per_device)
    mesh = cfg.mesh
    batch = comm4d.min_batch_compute_bound(m.d_model, m.d_ff, mesh.x, mesh.y, mesh.device.flops_per_second,
                                           mesh.device.ici_bytes_per_second, mesh.m_x, mesh.m_y, mesh.overlap)
    return memory.min_fsdp_degree(state, act, cfg.fsdp_device.capacity_bytes) is not None and batch is not None


def variant_config(cfg: CourseConfig, student_id: str) -> CourseConfig:
    """The config of one student's variant (the course config when there is no secret)."""
    if not cfg.secret:
        return cfg
    rng = random.Random(variant_seed(cfg.secret, student_id))
    for _ in range(1000):
        drawn = _draw(cfg, rng)
        if _sensible(drawn):
            return dataclasses.replace(drawn, source=f"the variant of student {student_id}")
    raise ShardlabError(f"no sensible variant found for student {student_id}")  # pragma: no cover


def check_student_id(student_id: str, where: str) -> str:
    if not _ID.match(student_id):
        raise ShardlabError(f"{where}: student id {one_line(repr(student_id), 80)} must be 1-64 letters, digits or ._@+- "
                            "(starting with a letter or digit)")
    return student_id


def read_roster(path: str | Path) -> list[tuple[str, str]]:
    """(student_id, name) rows of a roster CSV with columns student_id, name."""
    path = Path(path)
    if not path.is_file():
        raise ShardlabError(f"roster file not found: {path}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as fh:
            rows = list(csv.DictReader(fh))
            header = rows and list(rows[0]) or []
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ShardlabError(f"roster {path} is not a readable CSV: {exc}") from None
    if not rows or not set(ROSTER_COLUMNS) <= set(header):
        raise ShardlabError(f"roster {path} needs a header with columns {', '.join(ROSTER_COLUMNS)} "
                            "and at least one student")
    out, seen = [], set()
    for line, row in enumerate(rows, start=2):
        sid = check_student_id((row["student_id"] or "").strip(), f"roster {path} line {line}")
        if sid in seen:
            raise ShardlabError(f"roster {path} line {line}: student id {sid!r} appears twice")
        seen.add(sid)
        out.append((sid, (row["name"] or "").strip()))
    return out


def build_roster(cfg: CourseConfig, roster: str | Path, out: Path) -> list[Path]:
    """Each roster student's handout (md, html) and blank answers.toml under
    out/students/<student_id>/; needs a course secret."""
    from shardlab.autograder.engine.answer_sheet import sheet_toml
    from shardlab.autograder.publish.render import write_handout
    if not cfg.secret:
        raise ShardlabError("--roster needs a course secret: set [course].secret in the config "
                            "(without it anyone could compute every variant)")
    written = []
    for sid, name in read_roster(roster):
        variant = variant_config(cfg, sid)
        folder = out / "students" / sid
        blank = sheet_toml(variant, sid)
        written += write_handout(variant, folder, student=dict(id=sid, name=name, answers=blank))
        (folder / "answers.toml").write_text(blank, encoding="utf-8")
        written.append(folder / "answers.toml")
    return written
