"""Question 5 — pipeline parallelism, as an answer key.

The reference schedule of the distributed part (OneFOneBPipeline) is not here.

Conventions (docs/spec.md, question 5): the course's FFN-only model, its L
blocks split evenly over p stages (stage s = 0..p-1 holds blocks s·L/p up to
(s+1)·L/p); a mini-batch is split into m micro-batches of equal size; t_f and
t_b are one micro-batch's forward and backward time on one stage; seconds and
bytes. Activations and their gradients cross a stage boundary as BF16 tensors
of [tokens_per_microbatch, d_model] (bytes_per_value = 2).

The idle time of a GPipe or 1F1B step is p - 1 slots of (t_f + t_b) on every
stage, out of m + p - 1 slots in all. Two conventions name it:
  bubble fraction = idle / step time  = (p-1) / (m+p-1)    (always < 1)
  bubble ratio    = idle / ideal time = (p-1) / m           (Megatron-LM's "bubble time fraction")
They differ in the denominator only: the ratio compares the bubble with the
m useful slots, the fraction with the whole step, so fraction = ratio / (1 + ratio).

Invalid inputs (p < 1, m < 1, a stage outside 0..p-1, L not divisible by p,
an unknown schedule, v < 1) raise ValueError; the grader never passes them.
"""
from __future__ import annotations

from fractions import Fraction

from shardlab.reference.comm4d import forward_flops
from shardlab.reference.derivation import Worked, gb, n, sci
from shardlab.reference.memory import activation_bytes, devices_needed, param_count, training_state_bytes
from shardlab.reference.specs import BF16_BYTES

SCHEDULES = {"afab": "GPipe: all forwards, then all backwards", "gpipe": "GPipe (same as 'afab')",
             "1f1b": "one forward, one backward"}


def _check(p: int, m: int) -> None:
    if p < 1:
        raise ValueError(f"a pipeline needs at least one stage, got p = {p}")
    if m < 1:
        raise ValueError(f"a step needs at least one micro-batch, got m = {m}")


def bubble_fraction(p: int, m: int) -> float:
    """Idle fraction of a GPipe or 1F1B step: (p - 1) / (m + p - 1).

    The step takes m + p - 1 slots of (t_f + t_b); each stage works in m of
    them. 0 for p = 1; tends to 0 as m grows."""
    _check(p, m)
    return (p - 1) / (m + p - 1)


def bubble_ratio(p: int, m: int) -> float:
    """Bubble time over the ideal (bubble-free) time: (p - 1) / m.

    Unbounded (it exceeds 1 when m < p - 1); bubble_fraction = r / (1 + r)."""
    _check(p, m)
    return (p - 1) / m


def step_seconds(p: int, m: int, t_f: float, t_b: float) -> float:
    """Seconds of one step: (m + p - 1) · (t_f + t_b).

    t_f, t_b: one micro-batch's forward and backward seconds on one stage.
    The same for GPipe and 1F1B (1F1B reorders work, it does not remove idle slots)."""
    _check(p, m)
    return (m + p - 1) * (t_f + t_b)


def interleaved_bubble_fraction(p: int, m: int, v: int) -> float:
    """Bubble fraction with v model chunks per stage (interleaved 1F1B):
    (p - 1) / (v·m + p - 1).

    Each chunk's forward and backward takes 1/v of a stage's, so the fill
    and drain shrink to (p - 1)/v slots against m useful ones. v = 1 is
    bubble_fraction."""
    _check(p, m)
    if v < 1:
        raise ValueError(f"each stage holds at least one chunk, got v = {v}")
    return (p - 1) / (v * m + p - 1)


def inflight_microbatches(schedule: str, p: int, m: int, stage: int) -> int:
    """Peak number of micro-batches whose activations `stage` holds at once.

    "afab"/"gpipe": every forward runs before any backward: m.
    "1f1b": stage s runs p - s - 1 warm-up forwards, then one more forward
    before its first backward, and from then on frees one micro-batch for
    each new one: min(m, p - s). Stage 0 holds the most, the last stage one."""
    _check(p, m)
    if not 0 <= stage < p:
        raise ValueError(f"stage must be in 0..{p - 1}, got {stage}")
    if schedule in ("afab", "gpipe"):
        return m
    if schedule == "1f1b":
        return min(m, p - stage)
    raise ValueError(f"unknown schedule {schedule!r} (known: {', '.join(SCHEDULES)})")


def stage_activation_bytes(schedule: str, d_model: int, d_ff: int, num_blocks: int, p: int, m: int,
                           tokens_per_microbatch: int, stage: int) -> int:
    """Peak BF16 bytes `stage` keeps saved for backward:
    activation_bytes(d_model, d_ff, num_blocks / p, tokens_per_microbatch)
    (question 1's count for the stage's blocks and one micro-batch:
    (L/p) · T_mb · (D + F) · 2) times inflight_microbatches."""
    if num_blocks % p:
        raise ValueError(f"num_blocks = {num_blocks} must split evenly over p = {p} stages")
    per_microbatch = activation_bytes(d_model, d_ff, num_blocks // p, tokens_per_microbatch)
    return per_microbatch * inflight_microbatches(schedule, p, m, stage)


def p2p_bytes_per_step(d_model: int, tokens_per_microbatch: int, m: int, bytes_per_value: int = BF16_BYTES) -> int:
    """Bytes one stage boundary carries per step, both directions:
    2 · m · T_mb · d_model · bytes_per_value (each micro-batch's activation
    forward, its gradient backward, both [T_mb, d_model])."""
    return 2 * m * tokens_per_microbatch * d_model * bytes_per_value


def min_microbatches(p: int, target_fraction: float) -> int | None:
    """Smallest m >= 1 with bubble_fraction(p, m) <= target_fraction, or None.

    The comparison is Python's, in floats: a decimal target the fraction
    equals (6/200 against 0.03) counts as reached, as a loop over m finds it.
    (p-1)/(m+p-1) <= t  <=>  m >= (p-1)(1-t)/t  for t > 0: that bound, exact
    for the float t, is an m whose float fraction is <= t too (rounding keeps
    the order), and a bisection below it finds the smallest such m, since the
    float fraction never grows with m. p = 1 has no bubble: 1 for t >= 0. For
    p > 1 the fraction is positive for every m: None for t <= 0."""
    if p < 1:
        raise ValueError(f"a pipeline needs at least one stage, got p = {p}")
    t = target_fraction
    if p == 1:
        return 1 if t >= 0 else None
    if t <= 0:
        return None
    exact = Fraction(t)
    q = (p - 1) * (1 - exact) / exact
    lo, hi = 1, max(1, -((-q.numerator) // q.denominator))
    while lo < hi:
        mid = (lo + hi) // 2
        if (p - 1) / (mid + p - 1) <= t:
            hi = mid
        else:
            lo = mid + 1
    return lo


def worked(cfg) -> dict[str, Worked]:
    """The answers for the course's [pipeline] section, with derivations."""
    mod, pipe = cfg.model, cfg.pipeline
    d, f, layers = mod.d_model, mod.d_ff, mod.num_blocks
    p, m, t, v = pipe.stages, pipe.microbatches, pipe.tokens_per_microbatch, pipe.chunks
    c = pipe.device.flops_per_second
    per_stage = layers // p
    t_f = forward_flops(t, d, f, per_stage) / c
    t_b = 2 * t_f
    frac, ratio = bubble_fraction(p, m), bubble_ratio(p, m)
    step = step_seconds(p, m, t_f, t_b)
    one_mb = activation_bytes(d, f, per_stage, t)
    target = pipe.target_bubble_percent / 100
    m_min = min_microbatches(p, target)
    out = {
        "t_f": Worked("one micro-batch's forward on one stage",
                      "t_f = 4 · T_mb · D · F · (L/p) / C",
                      f"4 · {n(t)} · {n(d)} · {n(f)} · {per_stage} / {sci(c)}", t_f, f"{sci(t_f)} s"),
        "fraction": Worked("bubble fraction (idle time / step time)", "(p − 1) / (m + p − 1)",
                           f"({p} − 1) / ({m} + {p} − 1)", frac, f"{frac:.4f} ({100 * frac:.2f} %)"),
        "ratio": Worked("bubble ratio (idle time / ideal time)", "(p − 1) / m",
                        f"({p} − 1) / {m}", ratio, f"{ratio:.4f} ({100 * ratio:.2f} %)"),
        "step": Worked("one step (t_b = 2 · t_f)", "(m + p − 1) · (t_f + t_b)",
                       f"({m} + {p} − 1) · ({sci(t_f)} + {sci(t_b)}) s", step, f"{sci(step)} s"),
        "ideal": Worked("the same work without a bubble", "m · (t_f + t_b)",
                        f"{m} · ({sci(t_f)} + {sci(t_b)}) s", m * (t_f + t_b), f"{sci(m * (t_f + t_b))} s"),
        "interleaved": Worked(f"bubble fraction with v = {v} chunks per stage", "(p − 1) / (v · m + p − 1)",
                              f"({p} − 1) / ({v} · {m} + {p} − 1)", interleaved_bubble_fraction(p, m, v),
                              f"{interleaved_bubble_fraction(p, m, v):.4f}"),
        "act_microbatch": Worked("activations of one micro-batch on one stage (BF16)",
                                 "(L/p) · T_mb · (D + F) · 2",
                                 f"{per_stage} · {n(t)} · ({n(d)} + {n(f)}) · 2", one_mb, gb(one_mb)),
        "p2p": Worked("bytes across one stage boundary per step (BF16)", "2 · m · T_mb · D · 2",
                      f"2 · {m} · {n(t)} · {n(d)} · 2", p2p_bytes_per_step(d, t, m),
                      gb(p2p_bytes_per_step(d, t, m))),
        "min_m": Worked(f"fewest micro-batches for a bubble fraction ≤ {pipe.target_bubble_percent} % "
                        f"(t = {target:g})", "m = ceil((p − 1) · (1 − t) / t)",
                        f"ceil(({p} − 1) · (1 − {target:g}) / {target:g})", m_min,
                        "impossible" if m_min is None else f"m = {m_min}"),
    }
    if p == 1 or target >= 1:
        # the bound is <= 0 (no bubble, or a target every fraction meets): the fewest is one micro-batch
        out["min_m"] = Worked(out["min_m"].quantity, "m = max(1, ceil((p − 1) · (1 − t) / t))",
                              f"max(1, {out['min_m'].substituted})", m_min, f"m = {m_min}")
    if p == 1:
        del out["p2p"]          # a single stage has no boundary to cross
    for stage, where in ((0, "first"), (p - 1, "last")):
        k = inflight_microbatches("1f1b", p, m, stage)
        out[f"inflight_1f1b_{where}"] = Worked(
            f"1F1B: micro-batches in flight on the {where} stage (s = {stage})", "min(m,p − s)",
            f"min({m}, {p} − {stage})", k, f"{k} micro-batch{'es' if k != 1 else ''}")
    for schedule, name in (("gpipe", "GPipe"), ("1f1b", "1F1B")):
        for stage, where in ((0, "first"), (p - 1, "last")):
            k = inflight_microbatches(schedule, p, m, stage)
            b = stage_activation_bytes(schedule, d, f, layers, p, m, t, stage)
            formula = "m" if schedule == "gpipe" else "min(m,p − s)"
            out[f"act_{schedule}_{where}"] = Worked(
                f"{name}: activations held by the {where} stage (s = {stage})",
                f"{formula} · (L/p) · T_mb · (D + F) · 2", f"{k} · {n(one_mb)}", b,
                f"{k} micro-batch{'es' if k != 1 else ''}, {gb(b)}")
    out.update(_realism_notes(cfg, out["act_1f1b_first"].value))
    return out


def _realism_notes(cfg, act_first: int) -> dict[str, Worked]:
    """What one stage needs besides the activations (c) counts, against one device (keys
    "note_...": the solutions print them, answers.toml does not ask for them). Question 5
    isolates the schedule: "one stage per device" holds only where a stage's training
    state fits one, which for a large model it does not."""
    mod, pipe = cfg.model, cfg.pipeline
    gpu = pipe.device                  # the device each stage runs on
    p = pipe.stages
    stage_params = param_count(mod.d_model, mod.d_ff, mod.num_blocks // p)
    state = training_state_bytes(stage_params)
    devices = devices_needed(state + act_first, gpu.capacity_bytes)
    return {
        "note_stage_state": Worked(
            "training state of one stage (FP32 weights, gradients, two Adam moments)", "16 · P / p",
            f"16 · {n(param_count(mod.d_model, mod.d_ff, mod.num_blocks))} / {p}", state, gb(state)),
        "note_stage_devices": Worked(
            f"{gpu.name} devices one stage needs, with 1F1B's first-stage activations",
            f"ceil((16P/p + act) / {gpu.capacity_gb:g} GB)",
            f"ceil(({n(state)} + {n(act_first)}) / {n(gpu.capacity_bytes)})",
            devices, f"{devices} × {gpu.name}"),
    }
