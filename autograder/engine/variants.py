"""Per-student variants: each student's own numbers, from a generator seeded
by the student id and the course secret (`[course].secret`).

The engine seeds; the variant only draws config values within realistic
ranges and hands them to the reference, so a variant's handout, answer key
and answers.toml grading all come from the same `CourseConfig`. Same id, same
variant; no secret, no variants (everyone has the course config). The
per-student handouts are written by `publish.roster`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import hmac
import random
import re

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.sandbox.untrusted import one_line
from shardlab.reference import comm4d, memory
from shardlab.reference.config import BucketsConfig, CourseConfig, FsdpConfig, Mesh4D, PipelineConfig
from shardlab.reference.specs import HARDWARE, ModelConfig

# also a safe folder name; long enough for an email address (at most 254 characters), which is
# the student id on Gradescope without a roster (`answer_sheet`)
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,253}")
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


def _pipeline(course: PipelineConfig, num_blocks: int) -> PipelineConfig:
    """The course's pipeline made to split the variant's blocks evenly (docs/spec.md, question 5):
    the stage count above 1 that divides them closest to the course's (a prime number of blocks
    gets a stage per block), and the most chunks per stage up to the course's that divide a stage.
    It draws nothing and rejects no draw, so a variant's other numbers are those it had before
    question 5 existed."""
    p = min((k for k in range(2, num_blocks + 1) if num_blocks % k == 0), key=lambda k: (abs(k - course.stages), k))
    v = max(k for k in range(1, course.chunks + 1) if (num_blocks // p) % k == 0)
    return dataclasses.replace(course, stages=p, chunks=v)


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
            return dataclasses.replace(drawn, pipeline=_pipeline(cfg.pipeline, drawn.model.num_blocks),
                                       source=f"the variant of student {student_id}")
    raise ShardlabError(f"no sensible variant found for student {student_id}")  # pragma: no cover


def check_student_id(student_id: str, where: str) -> str:
    if not _ID.fullmatch(student_id):      # fullmatch: `$` would let a trailing newline through
        raise ShardlabError(f"{where}: student id {one_line(repr(student_id), 80)} must be 1-254 letters, "
                            "digits or ._@+- "
                            "(starting with a letter or digit)")
    return student_id
