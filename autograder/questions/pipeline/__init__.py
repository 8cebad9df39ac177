"""Question 5 — pipeline parallelism. docs/spec.md, question 5.

5.1-5.8 are plain function calls (the analytic half). The distributed half,
the student's OneFOneBPipeline on gloo ranks, is defined below the marker
at the end of this module.
"""
from __future__ import annotations

import math

from shardlab.autograder.core.casegen import model_shapes
from shardlab.autograder.core.parts import EXACT_INT, REAL, Compare, function_part, written_part
from shardlab.autograder.questions import Question
from shardlab.autograder.questions.pipeline.figures import FIGURES
from shardlab.autograder.kit.timelines import Drawn
from shardlab.reference import pipeline as ref

M = "pipeline"
COURSE = "the course pipeline"     # hidden: its values are the solutions' answers

# ---- 5.1-5.8: case generators (args, public, note) ---------------------------


def _course(cfg):
    """The course's p, m, T_mb, v and t_f (`reference.pipeline.worked`)."""
    pipe = cfg.pipeline
    t_f = ref.worked(cfg)["t_f"].value
    return pipe.stages, pipe.microbatches, pipe.tokens_per_microbatch, pipe.chunks, t_f


def _pm(rng, k):
    for _ in range(k):
        yield rng.randint(2, 64), rng.randint(1, 512)


def _bubble_args(edge: dict, edge_note: str):
    """5.1 and 5.2: one small public pipeline, the course's, one stage, `edge`, random ones."""
    def argsets(cfg, rng):
        p, m, *_ = _course(cfg)
        yield dict(p=4, m=8), True, "a small pipeline"
        yield dict(p=p, m=m), False, COURSE
        yield dict(p=1, m=8), False, "edge case: one stage"
        yield edge, False, edge_note
        for pp, mm in _pm(rng, 6):
            yield dict(p=pp, m=mm), False, ""
    return argsets


def _step_args(cfg, rng):
    p, m, _, _, t_f = _course(cfg)
    yield dict(p=4, m=8, t_f=1.0, t_b=2.0), True, "a small pipeline"
    yield dict(p=p, m=m, t_f=t_f, t_b=2 * t_f), False, COURSE
    yield dict(p=1, m=8, t_f=0.5, t_b=1.0), False, "edge case: one stage"
    yield dict(p=4, m=8, t_f=1.0, t_b=3.0), False, "edge case: t_b is not 2 t_f"
    for pp, mm in _pm(rng, 6):
        t = rng.uniform(1e-4, 1.0)
        yield dict(p=pp, m=mm, t_f=t, t_b=rng.choice([2 * t, rng.uniform(1e-4, 2.0)])), False, ""


def _interleaved_args(cfg, rng):
    p, m, _, v, _ = _course(cfg)
    yield dict(p=4, m=8, v=2), True, "a small pipeline"
    yield dict(p=p, m=m, v=v), False, COURSE
    yield dict(p=4, m=8, v=1), False, "edge case: one chunk per stage"
    yield dict(p=1, m=8, v=4), False, "edge case: one stage"
    for pp, mm in _pm(rng, 6):
        yield dict(p=pp, m=mm, v=rng.randint(2, 8)), False, ""


def _inflight_args(cfg, rng):
    p, m, *_ = _course(cfg)
    yield dict(schedule="1f1b", p=4, m=8, stage=0), True, "1F1B, a small pipeline"
    yield dict(schedule="1f1b", p=4, m=8, stage=3), True, "1F1B, a small pipeline"
    yield dict(schedule="afab", p=4, m=8, stage=1), True, "GPipe, a small pipeline"
    yield dict(schedule="1f1b", p=p, m=m, stage=0), False, COURSE
    yield dict(schedule="gpipe", p=p, m=m, stage=0), False, COURSE
    yield dict(schedule="gpipe", p=4, m=8, stage=2), False, "edge case: 'gpipe' is 'afab'"
    yield dict(schedule="1f1b", p=4, m=2, stage=0), False, "edge case: fewer micro-batches than stages"
    yield dict(schedule="1f1b", p=1, m=5, stage=0), False, "edge case: one stage"
    for pp, mm in _pm(rng, 4):      # 1F1B with more micro-batches than stages, any stage
        yield dict(schedule="1f1b", p=pp, m=pp + mm, stage=rng.randrange(pp)), False, ""
    for pp, mm in _pm(rng, 4):
        yield dict(schedule=rng.choice(["1f1b", "afab", "gpipe"]), p=pp, m=mm, stage=rng.randrange(pp)), False, ""


def _activation_args(cfg, rng):
    mod = cfg.model
    p, m, t, *_ = _course(cfg)
    small = dict(d_model=8, d_ff=24, num_blocks=4, p=2, m=4, tokens_per_microbatch=3)
    yield dict(schedule="1f1b", **small, stage=0), True, "1F1B, a tiny model"
    yield dict(schedule="afab", **small, stage=1), True, "GPipe, a tiny model"
    course = dict(d_model=mod.d_model, d_ff=mod.d_ff, num_blocks=mod.num_blocks, p=p, m=m, tokens_per_microbatch=t)
    yield dict(schedule="1f1b", **course, stage=0), False, COURSE
    yield dict(schedule="gpipe", **course, stage=0), False, COURSE
    yield dict(schedule="1f1b", **course, stage=p - 1), False, "edge case: the last stage"
    yield dict(schedule="1f1b", d_model=8, d_ff=24, num_blocks=3, p=1, m=6, tokens_per_microbatch=5,
               stage=0), False, "edge case: one stage"
    for k, (d, f, blocks) in enumerate(model_shapes(rng, 6)):
        pp = rng.randint(1, 16)
        mm = rng.randint(pp + 1, 4 * pp + 8)      # more micro-batches than stages: the schedules differ
        yield (dict(schedule=("1f1b", "afab")[k % 2], d_model=d, d_ff=f, num_blocks=pp * (blocks // 8 + 1),
                    p=pp, m=mm, tokens_per_microbatch=rng.randint(1, 8192), stage=rng.randrange(pp)), False, "")


def _p2p_args(cfg, rng):
    mod = cfg.model
    _, m, t, *_ = _course(cfg)
    yield dict(d_model=8, tokens_per_microbatch=3, m=4), True, "a tiny model"
    yield dict(d_model=mod.d_model, tokens_per_microbatch=t, m=m), False, COURSE
    yield dict(d_model=8, tokens_per_microbatch=5, m=4, bytes_per_value=4), False, "edge case: FP32 on the wire"
    yield dict(d_model=16, tokens_per_microbatch=3, m=1), False, "edge case: one micro-batch"
    for d, _, _ in model_shapes(rng, 6):
        yield dict(d_model=d, tokens_per_microbatch=rng.randint(1, 16384), m=rng.randint(1, 512)), False, ""


def _targets(rng, k):
    """(p, target) pairs whose answer is not on a float rounding tie:
    (p-1)(1-t)/t at least 1e-6 away from an integer."""
    while k:
        p, t = rng.randint(2, 64), rng.choice([rng.uniform(0.001, 0.5), rng.randint(1, 49) / 100])
        q = (p - 1) * (1 - t) / t
        if abs(q - round(q)) > 1e-6:
            k -= 1
            yield p, t


def _min_m_args(cfg, rng):
    pipe = cfg.pipeline
    yield dict(p=4, target_fraction=0.08), True, "a small pipeline"
    yield dict(p=pipe.stages, target_fraction=pipe.target_bubble_percent / 100), False, COURSE
    yield dict(p=5, target_fraction=0.25), False, "edge case: exactly on the target"
    yield dict(p=3, target_fraction=0.5), True, "edge case: exactly on the target"    # 2/(2 + 2), exact in binary
    yield dict(p=5, target_fraction=0.2), False, "edge case: exactly on a decimal target"
    yield dict(p=4, target_fraction=0.9), False, "edge case: one micro-batch is enough"
    yield dict(p=4, target_fraction=0.0), True, "edge case: unreachable"
    yield dict(p=1, target_fraction=0.0), True, "edge case: one stage"
    for p, t in _targets(rng, 6):
        yield dict(p=p, target_fraction=t), False, ""


# ---- misconceptions: the wrong function each mistake amounts to --------------

RATIO_MSG = ("matches the bubble ratio (idle time over the ideal time): the fraction divides the idle "
             "time by the whole step's time")
GPIPE_INFLIGHT_MSG = ("matches all m micro-batches in flight, GPipe's count: under 1F1B a stage starts "
                      "backward passes, and frees micro-batches, before it has run every forward")


def _ratio_target_m(p, t):
    # the smallest m with (p-1)/m <= t
    if p == 1:
        return 1 if t >= 0 else None
    return None if t <= 0 else max(1, math.ceil((p - 1) / t))


def _gpipe_bytes(schedule, d, f, blocks, p, m, t, stage):
    return ref.stage_activation_bytes("afab", d, f, blocks, p, m, t, stage)


PARTS = (
    function_part("5.1", M, "bubble_fraction", ref.bubble_fraction, 1,
                  _bubble_args(dict(p=4, m=1), "edge case: one micro-batch"), REAL,
                  misconceptions=(
                      ("p/(p+m)", "matches p / (p + m): count the stages that are idle while the "
                       "pipeline fills, and the slots the step really lasts", lambda p, m: p / (p + m)),
                      ("ratio for fraction", RATIO_MSG, ref.bubble_ratio),
                  ), description="idle fraction of a GPipe or 1F1B step"),
    function_part("5.2", M, "bubble_ratio", ref.bubble_ratio, 1,
                  _bubble_args(dict(p=8, m=2), "edge case: fewer micro-batches than stages"), REAL,
                  misconceptions=(("fraction for ratio", "matches the bubble fraction (idle over the whole "
                                   "step): the ratio compares the idle time with the ideal, bubble-free time",
                                   ref.bubble_fraction),),
                  description="bubble time over the ideal step time"),
    function_part("5.3", M, "step_seconds", ref.step_seconds, 1, _step_args, REAL,
                  misconceptions=(("no bubble", "matches the ideal step: the pipeline's fill and drain "
                                   "add idle slots", lambda p, m, tf, tb: m * (tf + tb)),),
                  description="seconds of one step, bubble included"),
    function_part("5.4", M, "interleaved_bubble_fraction", ref.interleaved_bubble_fraction, 1,
                  _interleaved_args, REAL,
                  misconceptions=(("chunks ignored", "matches the plain schedule's bubble: with v chunks per "
                                   "stage each slot of the fill and drain is v times shorter",
                                   lambda p, m, v: ref.bubble_fraction(p, m)),),
                  description="bubble fraction with v model chunks per stage"),
    function_part("5.5", M, "inflight_microbatches", ref.inflight_microbatches, 2, _inflight_args, EXACT_INT,
                  misconceptions=(
                      ("GPipe count for 1F1B", GPIPE_INFLIGHT_MSG, lambda s, p, m, st: m),
                      ("warm-up only", "matches the warm-up forwards alone: the stage runs one more forward "
                       "before its first backward", lambda s, p, m, st: min(m, p - st - 1)),
                  ), description="peak micro-batches a stage holds activations for"),
    function_part("5.6", M, "stage_activation_bytes", ref.stage_activation_bytes, 2, _activation_args,
                  EXACT_INT,
                  misconceptions=(
                      ("GPipe count for 1F1B", GPIPE_INFLIGHT_MSG, _gpipe_bytes),
                      ("whole model per stage", "matches every block of the model on one stage: a stage "
                       "holds num_blocks / p of them",
                       lambda s, d, f, b, p, m, t, st: p * ref.stage_activation_bytes(s, d, f, b, p, m, t, st)),
                      ("activations in FP32", "matches activations stored in FP32 (4 bytes): they are BF16, "
                       "2 bytes per value",
                       lambda s, d, f, b, p, m, t, st: 2 * ref.stage_activation_bytes(s, d, f, b, p, m, t, st)),
                  ), description="peak activation bytes one stage saves for backward"),
    function_part("5.7", M, "p2p_bytes_per_step", ref.p2p_bytes_per_step, 1, _p2p_args, EXACT_INT,
                  misconceptions=(
                      ("FP32 on the wire", "matches 4 bytes per value: the activations and gradients cross "
                       "the boundary in BF16 (2 bytes) unless bytes_per_value says otherwise",
                       lambda d, t, m, b=2: ref.p2p_bytes_per_step(d, t, m, 4)),
                      ("one direction", "matches the forward activations alone: their gradients come back "
                       "across the same boundary", lambda d, t, m, b=2: ref.p2p_bytes_per_step(d, t, m, b) // 2),
                  ), description="bytes across one stage boundary per step"),
    function_part("5.8", M, "min_microbatches", ref.min_microbatches, 2, _min_m_args, Compare("int_or_none"),
                  misconceptions=(("ratio for fraction", RATIO_MSG, _ratio_target_m),),
                  description="fewest micro-batches that reach a bubble fraction"),
)
ANALYTIC_PARTS = PARTS

WRITTEN = tuple(written_part(f"5.{letter}", M, f"({letter}) written: {title}",
                             f"in writeup.md, graded by hand: {what}")
                for letter, title, what in (
    ("a", "the bubble", "your derivations of the forward time, the bubble fraction and ratio and the step "
     "time, and why the fraction and the ratio differ"),
    ("b", "interleaving", "your derivation of the interleaved bubble fraction, and what interleaving costs"),
    ("c", "memory, GPipe against 1F1B", "your derivation of the micro-batches and bytes the first and the last "
     "stage hold at their peak under each schedule"),
    ("d", "communication between stages", "your derivation of the bytes crossing one stage boundary per step"),
    ("e", "how many micro-batches?", "your derivation of the fewest micro-batches that reach the target, and "
     "what that many costs"),
))

# ---- the distributed part (Task 5.9) ----
# 5.9-5.11 train the student's OneFOneBPipeline on 2 and 4 gloo ranks (probe "gloo", scenario
# "pipeline_train" in `kit.scenarios.pipeline`) and judge the same runs
# three ways: the weights, the traced point-to-point schedule and bytes, the micro-batches in flight.
# Every expected value is one entry per rank (stage).
from shardlab.autograder.core.parts import Call, Case, Misconception, Part  # noqa: E402
from shardlab.autograder.kit.checks import TRAINS_LIKE_ONE_PROCESS  # noqa: E402
from shardlab.autograder.kit.checks.pipeline import PIPELINE_IN_FLIGHT, PIPELINE_SCHEDULE  # noqa: E402
from shardlab.autograder.sandbox.gloo.seeds import data_seed  # noqa: E402
from shardlab.reference import pipeline_schedule as schedule  # noqa: E402

RUNS = ((2, 4, "sgd"), (2, 4, "adamw"), (4, 8, "sgd"), (4, 8, "adamw"), (4, 2, "sgd"))   # (p, m, optimizer)
# the public runs: both stage counts, so that a middle stage (the toy model's 4 blocks allow 1, 2 or 4
# stages: 4 is the only count with one) is checked in the kit as well as graded
PUBLIC_RUNS = ((2, 4, "sgd"), (4, 8, "sgd"))
RUN_STEPS = 2
FP32_WIRE = 4


def _run_cases(cfg, rng):
    # the seed depends on the run, not on the part, so the parts share the runs
    cases = []
    for k, (p, m, optimizer) in enumerate(RUNS):
        note = f"{p} stages, {m} micro-batches, {optimizer}"
        if m < p:
            note = f"edge case: fewer micro-batches than stages ({p} stages, {m} micro-batches)"
        args = dict(world_size=p, microbatches=m, optimizer=optimizer, steps=RUN_STEPS,
                    seed=cfg.course.seed % 1000 + 50 + k)
        cases.append(Case((Call(M, "pipeline_train", args),), public=(p, m, optimizer) in PUBLIC_RUNS,
                           note=note))
    return cases


def _run(case) -> tuple[int, int]:
    a = case.calls[0].args
    return a["world_size"], a["microbatches"]


def _stage_states(case, grad_scale: float = 1.0) -> list:
    """Single-process full-batch training of the whole model, cut into each rank's stage."""
    from shardlab.autograder.kit.toy_models import pipeline_single_process, stage_state_names
    a = case.calls[0].args
    whole = pipeline_single_process(a["optimizer"], a["steps"], data_seed(a["seed"]), a["microbatches"],
                                    grad_scale=grad_scale)
    p = a["world_size"]
    return [[{name: whole[name] for name in stage_state_names(s, p).values()} for s in range(p)]]


def _schedules(case, order=schedule.one_f_one_b) -> list:
    """Per stage: its order of forwards and backwards, its warm-up, and the bytes of a
    message and of a boundary's step (p2p_bytes_per_step, FP32)."""
    from shardlab.autograder.kit.toy_models import PIPE_D_MODEL, PIPE_ROWS
    p, m = _run(case)
    boundary = ref.p2p_bytes_per_step(PIPE_D_MODEL, PIPE_ROWS, m, bytes_per_value=FP32_WIRE)
    return [[dict(order=schedule.letters(order(s, p, m)), warmup=schedule.warmup_forwards(s, p, m),
                  message_bytes=PIPE_ROWS * PIPE_D_MODEL * FP32_WIRE, boundary_bytes=boundary)
             for s in range(p)]]


def _limits(case, order=schedule.one_f_one_b) -> list:
    p, m = _run(case)
    return [[dict(limit=schedule.peak_in_flight(order(s, p, m)), microbatches=m) for s in range(p)]]


GPIPE_ORDER_MSG = ("matches GPipe's order, every forward before any backward: under 1F1B a stage starts "
                   "its first backward after its warm-up forwards, and frees a micro-batch with each one")


def _run_part(id, title, points, compare, expect, description, misconceptions=(), function=None, drawn=None) -> Part:
    return Part(id=id, title=title, module=M, points=points, probe="gloo", function=function,
                cases=_run_cases, expect=expect, compare=compare, misconceptions=misconceptions,
                description=description, drawn=drawn)


DISTRIBUTED_PARTS = (
    _run_part("5.9", "OneFOneBPipeline trains like one process", 4, TRAINS_LIKE_ONE_PROCESS,
              _stage_states,
              "2 and 4 gloo ranks, one stage each, SGD and AdamW, 2 steps: every stage's weights equal "
              "single-process full-batch training of the whole model (FP32, tolerance 1e-5 + 1e-4·|w|)",
              misconceptions=(Misconception("sum", "matches summing the micro-batches' gradients instead of "
                                            "averaging: divide each micro-batch's loss by m",
                                            lambda case: _stage_states(case, _run(case)[1])),),
              function="OneFOneBPipeline"),
    _run_part("5.10", "1F1B order and p2p bytes", 3, PIPELINE_SCHEDULE, _schedules,
              "per step and stage, the traced point-to-point ops: only with the neighbours, one "
              "micro-batch's FP32 activation or gradient each, p2p_bytes_per_step(..., bytes_per_value=4) "
              "across each boundary, forwards and backwards in the 1F1B order",
              misconceptions=(Misconception("GPipe order", GPIPE_ORDER_MSG,
                                            lambda case: _schedules(case, schedule.gpipe)),),
              drawn=Drawn("pipeline", "step 2", "pipeline")),
    _run_part("5.11", "micro-batches in flight", 2, PIPELINE_IN_FLIGHT, _limits,
              "per step, no stage holds more micro-batches forwarded and not yet backwarded than "
              "1F1B allows it (Task 5.5's count): in the traced order and in the activations saved "
              "for backward (counted with saved-tensor hooks)",
              misconceptions=(Misconception("GPipe", GPIPE_ORDER_MSG, lambda case: _limits(case, schedule.gpipe)),)),
)



def _degenerate(cfg) -> str | None:
    """A one-stage pipeline (no bubble, no boundary: every part but (c) has nothing to ask), one chunk per
    stage ((b) is no interleaving), and a target no m reaches or every m reaches ((e): the bubble fraction
    (p − 1)/(m + p − 1) is positive for p > 1 and below 1 for every m)."""
    pipe = cfg.pipeline
    p, v, pct = pipe.stages, pipe.chunks, pipe.target_bubble_percent
    if p == 1:
        return ("5: the pipeline has a single stage (p = 1): no stage ever waits, so there is no bubble (its "
                "fraction and ratio are 0) for interleaving or more micro-batches to shrink, no stage boundary "
                "for anything to cross, and one micro-batch meets any target")
    found = []
    if v == 1:
        frac = ref.bubble_fraction(p, pipe.microbatches)
        found.append(f"5 (b): v = 1 chunk per stage is no interleaving: the bubble fraction stays {frac:.4f}, "
                     "as in (a)")
    fewest = ref.min_microbatches(p, pct / 100)
    if fewest is None:
        found.append(f"5 (e): no number of micro-batches brings the bubble fraction to at most {pct} %")
    elif pct >= 100:
        found.append(f"5 (e): the bubble fraction is below 100 % for every m, so a target of {pct} % is met by "
                     "any number of micro-batches: the fewest is 1")
    return "; ".join(found) or None


QUESTION = Question(number=5, module=M, title="Pipeline parallelism", template="pipeline.md.j2",
                    parts=ANALYTIC_PARTS + DISTRIBUTED_PARTS + WRITTEN, worked=ref.worked, figures=FIGURES,
                    degenerate=_degenerate)
