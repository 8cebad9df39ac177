"""Question 4 — DDP gradient bucket sizes. docs/spec.md, question 4.

4.1-4.4 are plain function calls; 4.5-4.7 run the student's BucketedDDP in
gloo worker groups of 2 and 3 ranks (probe "gloo", scenario "ddp_train" in
`kit.scenarios.buckets`). The three distributed parts ask for the
same runs, which the probe executes once each, and judge different parts of
the result: the final weights, the traced all-reduces, their timing.
"""
from __future__ import annotations

from functools import lru_cache

from shardlab.autograder.kit.checks.buckets import DDP_BUCKET_BYTES, DDP_OVERLAP, DDP_TRAINS_LIKE_ONE_PROCESS
from shardlab.autograder.sandbox.gloo.seeds import data_seed
from shardlab.autograder.core.parts import (REAL, Call, Case, Compare, Misconception, Part, function_part,
                                           written_part)
from shardlab.autograder.questions import Question
from shardlab.autograder.questions.buckets.figures import FIGURES
from shardlab.autograder.kit.timelines import Drawn
from shardlab.reference import buckets as ref
from shardlab.reference.cache import once_per_machine
from shardlab.reference.derivation import sci
from shardlab.reference.specs import MiB

M = "buckets"

# ---- 4.1-4.4: case generators (args, public, note) ---------------------------


def _layout_args(cfg, rng):
    yield dict(param_bytes=[4, 4, 4], bucket_bytes=8), True, "the docstring's example"
    yield dict(param_bytes=[240, 40, 160, 48, 12], bucket_bytes=256), True, "a small MLP, 256-byte cap"
    yield dict(param_bytes=[], bucket_bytes=1024), True, "edge case: no trainable parameters"
    yield dict(param_bytes=[100, 5000, 100], bucket_bytes=1000), False, "edge case: a parameter larger than the cap"
    yield dict(param_bytes=[500, 500, 500, 500], bucket_bytes=1000), False, "edge case: buckets filled exactly"
    yield dict(param_bytes=[8, 8, 8, 8], bucket_bytes=16), True, "edge case: buckets filled exactly"
    yield dict(param_bytes=[64] * 5, bucket_bytes=1), False, "edge case: every parameter alone"
    yield dict(param_bytes=[64] * 5, bucket_bytes=25 * MiB), False, "edge case: one bucket"
    for _ in range(12):
        sizes = [4 * rng.randint(1, 2**rng.randint(1, 18)) for _ in range(rng.randint(1, 40))]
        yield dict(param_bytes=sizes, bucket_bytes=rng.choice([4, 1024, 2**16, 2**20, 25 * MiB])), False, ""


def _forward_fill(param_bytes, bucket_bytes):
    buckets: list[list[int]] = []
    filled = 0
    for i, b in enumerate(param_bytes):
        if not buckets or filled + b > bucket_bytes:
            buckets.append([])
            filled = 0
        buckets[-1].append(i)
        filled += b
    return buckets


def _model_args(rng, k):
    for _ in range(k):
        yield dict(model_bytes=rng.randint(10**6, 10**11), bandwidth=rng.choice([1e9, 2.5e10, 1e11, 4.5e11]),
                   call_overhead=rng.choice([5e-6, 2e-5, 1e-4, 1e-3]))


def _overhead_args(cfg, rng):
    b = cfg.buckets
    yield dict(model_bytes=b.model_bytes, bandwidth=b.bandwidth, call_overhead=b.call_overhead_seconds,
               num_buckets=1), False, "the course numbers, one bucket"
    # hidden: with one number changed the handout's own model gives (a)'s answer back by one substitution
    yield dict(model_bytes=b.model_bytes, bandwidth=b.bandwidth, call_overhead=b.call_overhead_seconds,
               num_buckets=25), False, "the course numbers, 25 buckets"
    yield dict(model_bytes=10**8, bandwidth=10**9, call_overhead=10**-4, num_buckets=25), True, ""
    for args in _model_args(rng, 6):
        yield dict(args, num_buckets=rng.randint(1, 500)), False, ""


def _optimum_args(cfg, rng):
    b = cfg.buckets
    yield dict(model_bytes=b.model_bytes, bandwidth=b.bandwidth, call_overhead=b.call_overhead_seconds), False, \
        "the course numbers"
    yield dict(model_bytes=10**8, bandwidth=10**9, call_overhead=10**-4), True, ""
    for args in _model_args(rng, 6):
        yield args, False, ""


# The graded rule is the handout's, not PyTorch's own DDP (which assigns in forward order and
# reverses the buckets, closes a bucket once it reaches the cap, and caps its first at 1 MiB):
# the messages say what Task 4.1 asks, never that PyTorch does it.
FORWARD_MSG = ("matches filling buckets in forward order: Task 4.1 fills them from the last parameter, "
               "the order in which backward produces gradients")
AT_CAP_MSG = ("matches closing a bucket when a parameter would fill it exactly to the cap: "
              "in Task 4.1 a bucket may hold exactly bucket_bytes; only a parameter that would exceed the "
              "cap starts a new one")


SUM_MSG = ("matches summing the gradients instead of averaging: divide each all-reduced bucket by the "
           "world size")
TWICE_MSG = ("matches each gradient accumulated twice: a gradient hook that writes the gradient into .grad "
             "(or its bucket) and also returns it makes autograd add it a second time")
PAST_CAP_MSG = ("matches adding each parameter to the bucket before checking the cap, so a bucket can exceed "
                "bucket_bytes: a parameter joins the current bucket only if the bucket stays within the cap")
DECIMAL_MB_MSG = ("matches a cap of bucket_size_mb · 10^6 bytes: a bucket's MB is 2^20 bytes, as in "
                  "PyTorch DDP's bucket_cap_mb")


def _closed_at_cap(param_bytes, bucket_bytes):
    # the reference's rule with the cap exclusive: a bucket that would reach the cap exactly is closed
    buckets: list[list[int]] = []
    filled = 0
    for i in reversed(range(len(param_bytes))):
        if not buckets or filled + param_bytes[i] >= bucket_bytes:
            buckets.append([])
            filled = 0
        buckets[-1].append(i)
        filled += param_bytes[i]
    return buckets

# ---- 4.5-4.7: real runs of BucketedDDP on gloo ----------------------------------

# (model, bucket cap in bytes, optimizer): one bucket per parameter, a few, one. Every (model, cap)
# that runs with AdamW runs with SGD too: AdamW's update barely depends on the gradient's scale,
# SGD's is proportional to it (4.5 also checks the gradients themselves, step by step). New runs
# come last, so the earlier runs keep their seeds (cfg.course.seed + index)
DDP_RUNS = (("frozen_mlp", 1, "sgd"), ("frozen_mlp", 256, "adamw"), ("frozen_mlp", 25 * MiB, "sgd"),
            ("tied", 1, "adamw"), ("tied", 320, "sgd"), ("tied", 25 * MiB, "adamw"),
            ("frozen_mlp", 256, "sgd"), ("tied", 1, "sgd"), ("tied", 25 * MiB, "sgd"))
WORLD_SIZES = (2, 3)
STEPS = 3


def _ddp_cases(cfg, rng, multi_bucket_only=False):
    cases = []
    for world_size in WORLD_SIZES:
        for k, (model, cap, optimizer) in enumerate(DDP_RUNS):
            if multi_bucket_only and len(_layout(model, cap)) < 2:
                continue
            args = dict(world_size=world_size, model=model, bucket_size_mb=cap / MiB,
                        optimizer=optimizer, steps=STEPS, seed=cfg.course.seed % 1000 + k)
            note = f"{model}, {len(_layout(model, cap))} bucket(s), {optimizer}, {world_size} ranks"
            cases.append(Case((Call(M, "ddp_train", args),), public=world_size == 2, note=note))
    return cases


@lru_cache(maxsize=None)
def _param_bytes(model: str) -> list[int]:
    """Bytes of each trainable parameter of a toy model, read once per machine
    (`reference.cache`): building the model imports torch, seconds that would stand
    before every grading's first run, since the cases' notes count buckets."""
    def measure() -> list[int]:
        from shardlab.autograder.kit.toy_models import build_model, trainable_bytes
        return trainable_bytes(build_model(model, 0))
    return once_per_machine("param-bytes", {"model": model}, measure, ("shardlab.autograder.kit.toy_models",))


def _layout(model: str, cap: float, fill=ref.assign_buckets) -> list[list[int]]:
    return fill(_param_bytes(model), cap)


def _bucket_bytes(model: str, cap: float, fill=ref.assign_buckets) -> list[int]:
    sizes = _param_bytes(model)
    return sorted(sum(sizes[i] for i in bucket) for bucket in fill(sizes, cap))


def _one_process(case: Case, grad_scale: float = 1.0) -> list:
    """4.5's expected value: single-process training's final state and its gradients at every step
    (`toy_models.single_process_run`), and the model's buffer names."""
    from shardlab.autograder.kit.toy_models import build_model, single_process_run
    a = case.calls[0].args
    run = single_process_run(a["model"], a["optimizer"], a["steps"], data_seed(a["seed"]), a["world_size"],
                             grad_scale=grad_scale)
    return [dict(run, buffers=[name for name, _ in build_model(a["model"], 0).named_buffers()])]


def _past_the_cap(param_bytes, bucket_bytes):
    # a parameter always joins the current bucket; the bucket is closed once it is over the cap
    buckets: list[list[int]] = [[]]
    filled = 0
    for i in reversed(range(len(param_bytes))):
        if filled > bucket_bytes:
            buckets.append([])
            filled = 0
        buckets[-1].append(i)
        filled += param_bytes[i]
    return [b for b in buckets if b]


def _overlap_expected(case: Case) -> list:
    model, cap = _args(case)
    return [dict(layout=_layout(model, cap), param_bytes=_param_bytes(model))]


def _ddp_part(id, title, points, compare, expect, description, multi_bucket_only=False,
              misconceptions=(), function=None, drawn=None) -> Part:
    return Part(id=id, title=title, module=M, points=points, probe="gloo", function=function,
                cases=lambda cfg, rng: _ddp_cases(cfg, rng, multi_bucket_only),
                expect=expect, compare=compare, misconceptions=misconceptions, description=description,
                drawn=drawn)


def _args(case) -> tuple[str, float]:
    a = case.calls[0].args
    return a["model"], a["bucket_size_mb"] * MiB


PARTS = (
    function_part("4.1", M, "assign_buckets", ref.assign_buckets, 2, _layout_args, Compare("exact"),
                  misconceptions=(("forward fill", FORWARD_MSG, _forward_fill),
                                  ("closed at the cap", AT_CAP_MSG, _closed_at_cap)),
                  description="bucket layout, filled in reverse parameter order"),
    function_part("4.2", M, "ddp_overhead_seconds", ref.ddp_overhead_seconds, 1, _overhead_args, REAL,
                  misconceptions=(("all transfers exposed", "matches exposing every bucket's transfer: "
                                   "only the last bucket's transfer is not hidden by backward",
                                   lambda s, w, o, k: k * o + s / w),),
                  description="communication overhead DDP adds with n_b buckets"),
    function_part("4.3", M, "optimal_num_buckets", ref.optimal_num_buckets, 1, _optimum_args, REAL,
                  misconceptions=(("size for count", "matches the optimal bucket size in bytes, "
                                   "not the number of buckets", ref.optimal_bucket_bytes),),
                  description="number of buckets minimising the overhead"),
    function_part("4.4", M, "optimal_bucket_bytes", ref.optimal_bucket_bytes, 1, _optimum_args, REAL,
                  misconceptions=(("MB for bytes", "matches the optimum in MB: the answer is in bytes",
                                   lambda s, w, o: ref.optimal_bucket_bytes(s, w, o) / MiB),),
                  description="bucket size in bytes at the optimum"),
    _ddp_part("4.5", "BucketedDDP trains like one process", 4, DDP_TRAINS_LIKE_ONE_PROCESS, _one_process,
              "2 and 3 gloo ranks from different initial weights, SGD and AdamW, 3 steps: at every step, "
              "each trainable parameter's .grad right after finish_gradient_synchronization() equals the "
              "one-process gradient of the mean loss over the whole batch, and the final weights equal "
              "single-process full-batch training (weights and gradients: FP32, tolerance 1e-5 + 1e-4·|w|)",
              misconceptions=(Misconception("sum", SUM_MSG,
                                            lambda case: _one_process(case, case.calls[0].args["world_size"])),
                              Misconception("accumulated twice", TWICE_MSG, lambda case: _one_process(case, 2))),
              function="BucketedDDP"),
    _ddp_part("4.6", "one all-reduce per bucket", 2, DDP_BUCKET_BYTES,
              lambda case: [_bucket_bytes(*_args(case))],
              "the traced all-reduces of every step: one per bucket of assign_buckets (yours or the "
              "reference's: a wrong layout costs 4.1), each of the bucket's byte size",
              misconceptions=(Misconception("forward fill", FORWARD_MSG,
                                            lambda case: [_bucket_bytes(*_args(case), fill=_forward_fill)]),
                              Misconception("past the cap", PAST_CAP_MSG,
                                            lambda case: [_bucket_bytes(*_args(case), fill=_past_the_cap)]),
                              Misconception("MB as 10^6 bytes", DECIMAL_MB_MSG,
                                            lambda case: [_bucket_bytes(_args(case)[0],
                                                                        _args(case)[1] / MiB * 10**6)]))),
    _ddp_part("4.7", "all-reduce overlaps backward", 2, DDP_OVERLAP, _overlap_expected,
              "with two or more buckets, each bucket's all-reduce starts, async, as soon as the bucket is "
              "complete: before backward produces any gradient after the bucket's last one (never inside "
              "finish_gradient_synchronization())", multi_bucket_only=True,
              drawn=Drawn("bucketed-ddp", "step 2", "overlap")),
)


WRITTEN = (
    written_part("4.a", M, "(a) written: the overhead of bucketing",
                 "in writeup.md, graded by hand: your derivation of the time DDP adds with n_b buckets, and "
                 "its value with a single bucket"),
    written_part("4.b", M, "(b) written: the best bucket size",
                 "in writeup.md, graded by hand: your derivation of the best number of buckets and bucket "
                 "size, and the overhead that remains"),
    # the experiment runs on the student's own machine: a place for the answer, graded only when the
    # course gives it points ([points] "4.c")
    written_part("4.c", M, "(c) written: measure it",
                 "in writeup.md: your predicted and measured best bucket sizes, and the gap between them "
                 "explained", points=0),
)


def _degenerate(cfg) -> str | None:
    """(b)'s stationary point sqrt(s / (w·o)) below one bucket: the overhead n_b·o + s/(n_b·w) only grows
    for n_b >= 1 (its derivative o − s/(n_b²·w) > 0), so one bucket is the optimum."""
    b = cfg.buckets
    stationary = ref.optimal_num_buckets(b.model_bytes, b.bandwidth, b.call_overhead_seconds)
    if stationary >= 1:
        return None
    one = ref.ddp_overhead_seconds(b.model_bytes, b.bandwidth, b.call_overhead_seconds, 1)
    return (f"4 (b): sqrt(s / (w·o)) ≈ {stationary:.2f} is below one bucket: every bucket past the first adds "
            f"more call overhead than it hides transfer, so one bucket, the whole model, is the optimum, with "
            f"an overhead of {sci(one)} s")


QUESTION = Question(number=4, module=M, title="DDP gradient bucket sizes", template="buckets.md.j2",
                    parts=PARTS + WRITTEN, worked=ref.worked, figures=FIGURES, degenerate=_degenerate)
