"""Per-student variants: each student's own numbers, from a generator seeded
by the student id and the course secret (`[course].secret`).

What is drawn is the course's to say (`[variants]`, `reference.config.Draw`):
each named key from its list or range, everything else the course's own
value. Without the section only the model's d_model, d_ff and num_blocks are
drawn, within ±25 % of the course's (`reference.config.default_draws`). A
drawn variant is the course config read again with the drawn values
(`reference.config.with_values`), so every check of a config holds for it; a
draw that fails one, or that makes a question degenerate where the course's
own numbers do not (`questions.degeneracies`), is drawn again. Same secret,
id and config, same variant; no secret, no variants. The variant's handout,
answer key and answers.toml grading all come from its `CourseConfig`; the
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
from shardlab.reference.config import CourseConfig, default_draws, with_values

# also a safe folder name; long enough for an email address (at most 254 characters), which is
# the student id on Gradescope without a roster (`answer_sheet`)
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,253}")
ATTEMPTS = 1000


def variant_seed(secret: str, student_id: str) -> str:
    """A keyed hash: without the secret, an id says nothing about its numbers."""
    return hmac.new(secret.encode(), student_id.encode(), hashlib.sha256).hexdigest()


def model_name(d_model: int, d_ff: int, num_blocks: int) -> str:
    """A drawn model is named for what it is, its shape: "FFN-L108-D12288-F40960" (blocks,
    width, FFN width). Not its size: the parameter count is an answer of question 1."""
    return f"FFN-L{num_blocks}-D{d_model}-F{d_ff}"


def _drawn(cfg: CourseConfig, rng: random.Random) -> dict:
    """One draw of every key the course varies, as {"section.key": value}."""
    draws = cfg.draws if cfg.draws is not None else default_draws(cfg)
    values = {d.key: d.pick(rng) for d in draws}
    ratio = values.pop("model.ffn_ratio", None)
    if ratio is not None:
        d_model = values.get("model.d_model", cfg.model.d_model)
        values["model.d_ff"] = 128 * max(1, round(ratio * d_model / 128))
    return values


def variant_config(cfg: CourseConfig, student_id: str) -> CourseConfig:
    """The config of one student's variant (the course config when there is no secret)."""
    if not cfg.course.secret:
        return cfg
    from shardlab.autograder.questions import degeneracies
    rng = random.Random(variant_seed(cfg.course.secret, student_id))
    allowed = set(degeneracies(cfg))          # a course degenerate by design keeps that, no more
    why = ""
    for _ in range(ATTEMPTS):
        values = _drawn(cfg, rng)
        try:
            variant = with_values(cfg, values)
        except ShardlabError as exc:
            why = str(exc)
            continue
        worse = {q: reason for q, reason in degeneracies(variant).items() if q not in allowed}
        if worse:
            why = next(iter(worse.values()))
            continue
        m = variant.model
        if any(key.startswith("model.") for key in values) and m != cfg.model:
            variant = dataclasses.replace(variant, model=dataclasses.replace(
                m, name=model_name(m.d_model, m.d_ff, m.num_blocks)))
        return dataclasses.replace(variant, source=f"the variant of student {student_id}")
    drawn_from = "[variants]" if cfg.draws is not None else "the default draw (±25 % of the model's sizes)"
    raise ShardlabError(f"no variant drawn from {drawn_from} in {ATTEMPTS} tries is a usable course; "
                        f"the last: {one_line(why, 200)}")


def check_drawable(cfg: CourseConfig) -> None:
    """Fail now, in one line, when the course's variants cannot be drawn (`variant_config`)."""
    if cfg.course.secret:
        variant_config(cfg, "shardlab-check")


def check_student_id(student_id: str, where: str) -> str:
    if not _ID.fullmatch(student_id):      # fullmatch: `$` would let a trailing newline through
        raise ShardlabError(f"{where}: student id {one_line(repr(student_id), 80)} must be 1-254 letters, "
                            "digits or ._@+- "
                            "(starting with a letter or digit)")
    return student_id
