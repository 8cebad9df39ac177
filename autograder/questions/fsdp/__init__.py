"""Question 2 — FSDP. docs/spec.md, question 2.

2.1-2.6 are the alpha-beta model of one FSDP unit (plain function calls);
2.7-2.11 train the student's FSDP on 2 and 3 gloo ranks (probe "gloo",
scenario "fsdp_train" in `kit.scenarios.fsdp`) and judge
different parts of the same runs: the weights, what each rank stores, the
collectives, agreement with PyTorch's fully_shard, and prefetching.
"""
from __future__ import annotations

import math

from shardlab.autograder.kit.checks import TRAINS_LIKE_ONE_PROCESS
from shardlab.autograder.kit.checks.fsdp import (FSDP_COLLECTIVES, FSDP_PREFETCH, FSDP_STORAGE,
                                                  FSDP_TRAINS_LIKE_ONE_PROCESS)
from shardlab.autograder.sandbox.gloo.seeds import data_seed
from shardlab.autograder.core.parts import (REAL, Call, Case, Compare, Misconception, Part, function_part,
                                               written_part)
from shardlab.autograder.questions import Question
from shardlab.autograder.questions.fsdp.figures import FIGURES
from shardlab.autograder.kit.timelines import Drawn
from shardlab.reference import fsdp as ref
from shardlab.reference.specs import FP32_BYTES, HARDWARE

M = "fsdp"

# ---- 2.1-2.6: case generators (args, public, note) ---------------------------


def _network_args(cfg, rng, k):
    """Random (alpha, beta, C, unit_params) in the ranges of real hardware."""
    for _ in range(k):
        yield dict(alpha=rng.choice([1e-6, 5e-6, 2e-5, 1e-4]), beta=rng.choice([2.5e10, 5e10, 4.5e11, 9e11]),
                   flops=rng.choice([h.flops_per_second for h in HARDWARE.values()]),
                   unit=128 * 128 * rng.randint(1, 60_000))


def _course(cfg):
    f = cfg.fsdp
    unit = cfg.model.d_model * cfg.model.d_ff
    return f, unit, f.device.flops_per_second


EXAMPLE_UNIT = 4096 * 16384     # a public example layer: the course's layer gives the handout's answers
# public example networks (alpha, beta, p) and device C: a public case on the course's networks with only
# the layer changed is the handout's question scaled by one ratio, so the public cases use none of them
EXAMPLE_NETWORKS = ((1e-5, 2e11, 16), (5e-5, 2.5e10, 256))
EXAMPLE_TOKENS, EXAMPLE_FLOPS = 2048, 3.12e14


def _allgather_args(cfg, rng):
    f, unit, _ = _course(cfg)
    for net, p in ((f.intra_network, f.intra_devices), (f.inter_network, f.inter_devices)):
        yield dict(unit_bytes=2 * unit, p=p, alpha=net.alpha, beta=net.beta), False, f"one layer, {net.name}"
    for alpha, beta, p in EXAMPLE_NETWORKS:
        yield dict(unit_bytes=2 * EXAMPLE_UNIT, p=p, alpha=alpha, beta=beta), True, ""
    yield (dict(unit_bytes=2 * unit, p=1, alpha=f.inter_network.alpha, beta=f.inter_network.beta), False,
           "edge case: p = 1")
    alpha, beta, _ = EXAMPLE_NETWORKS[0]
    yield dict(unit_bytes=2 * EXAMPLE_UNIT, p=1, alpha=alpha, beta=beta), True, "edge case: p = 1"
    for a in _network_args(cfg, rng, 5):
        yield dict(unit_bytes=2 * a["unit"], p=rng.choice([2, 3, 8, 48, 1024]), alpha=a["alpha"],
                   beta=a["beta"]), False, ""


def _forward_args(cfg, rng):
    f, unit, c = _course(cfg)
    yield dict(tokens=f.tokens_per_device, unit_params=unit, flops_per_second=c), False, "one layer"
    yield dict(tokens=EXAMPLE_TOKENS, unit_params=EXAMPLE_UNIT, flops_per_second=EXAMPLE_FLOPS), True, ""
    yield dict(tokens=0, unit_params=unit, flops_per_second=c), False, "edge case: no tokens"
    for a in _network_args(cfg, rng, 4):
        yield dict(tokens=rng.randint(1, 2**20), unit_params=a["unit"], flops_per_second=a["flops"]), False, ""


EQUAL_TIMES = "edge case: equal times are communication bound"


def _bound_args(cfg, rng):
    f, unit, c = _course(cfg)
    for net, p in ((f.intra_network, f.intra_devices), (f.inter_network, f.inter_devices)):
        yield (dict(tokens=f.tokens_per_device, unit_params=unit, p=p, alpha=net.alpha, beta=net.beta,
                    flops_per_second=c, bytes_per_param=2), False, f"one layer, {net.name}")
    for alpha, beta, p in EXAMPLE_NETWORKS:      # hidden behind the forward, then communication bound
        yield (dict(tokens=EXAMPLE_TOKENS, unit_params=EXAMPLE_UNIT, p=p, alpha=alpha, beta=beta,
                    flops_per_second=EXAMPLE_FLOPS, bytes_per_param=2), True, "")
    # "equal times count as bound": ties exact in binary (powers of two throughout, log2(p) whole)
    yield (dict(tokens=512, unit_params=4096, p=2, alpha=2.0**-9, beta=2.0**22, flops_per_second=2.0**30,
                bytes_per_param=2), True, EQUAL_TIMES)
    yield (dict(tokens=2048, unit_params=2**16, p=4, alpha=2.0**-14, beta=2.0**31, flops_per_second=2.0**40,
                bytes_per_param=4), False, EQUAL_TIMES)
    for a in _network_args(cfg, rng, 8):
        yield (dict(tokens=rng.randint(1, 2**16), unit_params=a["unit"], p=rng.choice([2, 8, 64, 512]),
                    alpha=a["alpha"], beta=a["beta"], flops_per_second=a["flops"],
                    bytes_per_param=rng.choice([2, 4])), False, "")


def _max_devices_args(cfg, rng):
    f, unit, c = _course(cfg)
    net = f.inter_network
    yield (dict(tokens=f.tokens_per_device, unit_params=unit, alpha=net.alpha, beta=net.beta,
                flops_per_second=c, bytes_per_param=2), False, "one layer, inter-node (the bandwidth term binds)")
    yield (dict(tokens=4 * f.tokens_per_device, unit_params=unit, alpha=net.alpha, beta=net.beta,
                flops_per_second=c, bytes_per_param=2), False, "one layer, inter-node, 4x the tokens")
    yield (dict(tokens=4 * f.tokens_per_device, unit_params=EXAMPLE_UNIT, alpha=net.alpha, beta=net.beta,
                flops_per_second=c, bytes_per_param=2), True, "")
    # rhs / alpha = 42: p = 2**42, a count no search over p reaches in time (the docstring's closed form)
    yield (dict(tokens=EXAMPLE_TOKENS, unit_params=EXAMPLE_UNIT, alpha=5e-6, beta=2e11,
                flops_per_second=EXAMPLE_FLOPS, bytes_per_param=2), True, "")
    yield (dict(tokens=4 * EXAMPLE_TOKENS, unit_params=EXAMPLE_UNIT, alpha=1e-7, beta=2e11,
                flops_per_second=EXAMPLE_FLOPS, bytes_per_param=2), True, "edge case: past float range")
    course_intra = dict(tokens=f.tokens_per_device, unit_params=unit, alpha=f.intra_network.alpha,
                        beta=f.intra_network.beta, flops_per_second=c, bytes_per_param=2)
    # the course layer intra-node: an astronomically large count (the shipped course's, about 2^670,
    # is a float; only past 2^1024 is it math.inf): labelled for what it is on this course
    count = ref.max_devices_before_comm_bound(**course_intra)
    yield course_intra, False, ("edge case: past float range" if math.isinf(count) else
                                "edge case: astronomically many devices, within float range" if count > 1e12 else
                                "one layer, intra-node")
    # rhs = (2*10/1e6 - 2/1e6) * 1000 = 0.018; alpha = 0.002 -> p = 2**9 = 512
    yield (dict(tokens=10, unit_params=1000, alpha=0.002, beta=1e6, flops_per_second=1e6, bytes_per_param=2),
           False, "a power of two")
    for a in _network_args(cfg, rng, 5):
        yield (dict(tokens=rng.randint(1, 2**17), unit_params=a["unit"], alpha=a["alpha"], beta=a["beta"],
                    flops_per_second=a["flops"], bytes_per_param=2), False, "")


def _min_tokens_args(cfg, rng):
    f, unit, c = _course(cfg)
    for net, p in ((f.intra_network, f.intra_devices), (f.inter_network, f.inter_devices)):
        yield (dict(unit_params=unit, p=p, alpha=net.alpha, beta=net.beta, flops_per_second=c,
                    bytes_per_param=2), False, f"one layer, {net.name}")
    for alpha, beta, p in EXAMPLE_NETWORKS:
        yield (dict(unit_params=EXAMPLE_UNIT, p=p, alpha=alpha, beta=beta, flops_per_second=EXAMPLE_FLOPS,
                    bytes_per_param=2), True, "")
    for a in _network_args(cfg, rng, 5):
        yield (dict(unit_params=a["unit"], p=rng.choice([2, 8, 64, 4096]), alpha=a["alpha"], beta=a["beta"],
                    flops_per_second=a["flops"], bytes_per_param=rng.choice([2, 4])), False, "")


def _step_bytes_args(cfg, rng):
    m = cfg.model
    p_all = 2 * m.d_model * m.d_ff * m.num_blocks
    yield dict(num_params=p_all, p=cfg.fsdp.inter_devices, bytes_per_param=2), False, "the course model"
    yield dict(num_params=10**9, p=8, bytes_per_param=2), True, ""
    yield dict(num_params=p_all, p=1, bytes_per_param=2), False, "edge case: one device"
    for _ in range(5):
        yield (dict(num_params=rng.randint(1, 10**12), p=rng.randint(2, 4096), bytes_per_param=rng.choice([2, 4])),
               False, "")


# ---- misconceptions -------------------------------------------------------------

LN_MSG = "matches using the natural log: the latency term is alpha * log2(p), base 2"


def _ln_allgather(unit_bytes, p, alpha, beta):
    return 0.0 if p == 1 else alpha * math.log(p) + unit_bytes / beta


def _ln_max_devices(tokens, unit, alpha, beta, c, b=2):
    rhs = (2 * tokens / c - b / beta) * unit
    return 1.0 if rhs <= 0 else (math.inf if rhs / alpha > 709 else math.exp(rhs / alpha))


NO_CLAMP_MSG = ("matches the solved formula without its floor at one device: when even at p = 1 the "
                "bandwidth term alone takes at least as long as the forward, the formula's p below 1 "
                "is no device count (the docstring says what to return)")
ALL_REDUCE_MSG = ("matches an all-reduce of the gradients, which brings every rank all of them: under full "
                  "sharding a rank keeps only its shard's gradients")


def _unclamped_max_devices(tokens, unit, alpha, beta, c, b=2):
    # 2 ** (rhs / alpha) for any rhs, below 1 when the bandwidth term alone binds
    rhs = (2 * tokens / c - b / beta) * unit
    if alpha == 0 or rhs / alpha >= 1024:
        return math.inf
    return 2.0 ** (rhs / alpha)


def _all_reduce_step_bytes(n, p, b=2):
    # two all-gathers, (p-1)/p each, and an all-reduce of the gradients, 2 (p-1)/p
    return (1 + 1 + 2) * (p - 1) / p * n * b


ANALYTIC = (
    function_part("2.1", M, "allgather_seconds", ref.allgather_seconds, 1, _allgather_args, REAL,
                  misconceptions=(("natural log", LN_MSG, _ln_allgather),),
                  description="alpha-beta time of one unit's all-gather"),
    function_part("2.2", M, "forward_seconds", ref.forward_seconds, 1, _forward_args, REAL,
                  misconceptions=(("one FLOP per parameter", "matches 1 FLOP per parameter per token: "
                                   "recount the matmul's FLOPs with the handout's convention",
                                   lambda t, u, c: t * u / c),),
                  description="one unit's forward time"),
    function_part("2.3", M, "is_communication_bound", ref.is_communication_bound, 1, _bound_args,
                  Compare("exact"), description="does the next all-gather take at least as long as this forward?"),
    function_part("2.4", M, "max_devices_before_comm_bound", ref.max_devices_before_comm_bound, 2,
                  _max_devices_args, REAL,
                  misconceptions=(("natural log", "matches solving with the natural log: the latency "
                                   "term is alpha * log2(p), base 2",
                                   _ln_max_devices),
                                  ("no clamp to 1", NO_CLAMP_MSG, _unclamped_max_devices)),
                  description="largest device count before communication binds"),
    function_part("2.5", M, "min_tokens_to_hide_allgather", ref.min_tokens_to_hide_allgather, 1,
                  _min_tokens_args, REAL,
                  misconceptions=(("natural log", LN_MSG,
                                   lambda u, p, a, b, c, bpp=2: c / 2 * (a * math.log(p) / u + bpp / b)),),
                  description="tokens per device that hide the all-gather"),
    function_part("2.6", M, "step_comm_bytes", ref.step_comm_bytes, 1, _step_bytes_args, REAL,
                  misconceptions=(("two collectives", "matches two collectives per step: FSDP all-gathers "
                                   "the weights again before backward",
                                   lambda n, p, b=2: 2 * (p - 1) / p * n * b),
                                  ("all-reduce of gradients", ALL_REDUCE_MSG, _all_reduce_step_bytes)),
                  description="bytes each rank receives per training step"),
)

# ---- 2.7-2.11: the student's FSDP on gloo -----------------------------------------

RUNS = ((2, "sgd"), (2, "adamw"), (3, "sgd"), (3, "adamw"))   # 3 ranks: uneven shards, padding
MODEL, STEPS = "frozen_mlp", 3


def _run_cases(cfg, rng, runs=RUNS):
    # the seed depends on the run, not on the part, so parts share the runs
    return [Case((Call(M, "fsdp_train", dict(world_size=w, model=MODEL, optimizer=o, steps=STEPS,
                                             seed=cfg.course.seed % 1000 + RUNS.index((w, o)))),),
                 public=w == 2, note=f"{MODEL}, {o}, {w} ranks")
            for w, o in runs]


def _units() -> list[int]:
    """Trainable elements of each unit (nn.Linear), in module order."""
    from shardlab.autograder.kit.toy_models import build_model
    from torch import nn
    model = build_model(MODEL, 0)
    return [sum(p.numel() for p in m.parameters(recurse=False) if p.requires_grad)
            for m in model.modules() if isinstance(m, nn.Linear)
            and any(p.requires_grad for p in m.parameters(recurse=False))]


def _args(case):
    return case.calls[0].args


def _unit_names() -> list[list[str]]:
    """The trainable parameters of each unit (nn.Linear), by state name, in module order (named_parameters)."""
    from shardlab.autograder.kit.toy_models import build_model
    from torch import nn
    model = build_model(MODEL, 0)
    return [[f"{name}.{n}" for n, t in m.named_parameters() if t.requires_grad]
            for name, m in model.named_modules() if isinstance(m, nn.Linear)
            and any(t.requires_grad for t in m.parameters(recurse=False))]


def _shard_slices(grads: dict, p: int, rank: int) -> list[list[float]]:
    """Rank `rank`'s shard of each unit's gradient: the unit's trainable gradients flattened in
    order, right-padded with zeros to a multiple of p, its rank-th 1/p (docs/spec.md, question 2)."""
    out = []
    for names in _unit_names():
        flat = [x for name in names for x in _flatten(grads[name])]
        chunk = math.ceil(len(flat) / p)
        flat += [0.0] * (chunk * p - len(flat))
        out.append(flat[rank * chunk:(rank + 1) * chunk])
    return out


def _flatten(values) -> list[float]:
    return [x for v in values for x in _flatten(v)] if isinstance(values, list) else [values]


def _single_process(case, grad_scale=1.0):
    """2.7's expected value: single-process training's final state; each rank's shard of each unit's
    one-process gradient at every step; and each frozen layer's shard size, ceil(P/p) (a frozen
    layer sharded as trainable is named by it)."""
    from shardlab.autograder.kit.toy_models import build_model, single_process_run
    from torch import nn
    a = _args(case)
    p = a["world_size"]
    run = single_process_run(a["model"], a["optimizer"], a["steps"], data_seed(a["seed"]), p, grad_scale=grad_scale)
    shards = [[_shard_slices(step, p, r) for step in run["grads"]] for r in range(p)]
    frozen = {f"{name}.weight": math.ceil(m.weight.numel() / p) for name, m in build_model(MODEL, 0).named_modules()
              if isinstance(m, nn.Linear) and not any(t.requires_grad for t in m.parameters(recurse=False))}
    return [dict(state=run["state"], shards=shards, frozen=frozen)]


def _fully_shard(case):
    from shardlab.autograder.sandbox.zygote import reference_rank
    from shardlab.reference.fsdp2_agreement import fully_shard_state
    a = _args(case)
    return [fully_shard_state(a["model"], a["optimizer"], a["steps"], data_seed(a["seed"]), a["world_size"],
                              launch_rank=reference_rank)]


def _storage_budget(case):
    """Σ ceil(P_u / p) over units, plus what is never sharded (frozen weights,
    buffers); and the number of units, each of which must be gathered in
    every forward for the count to mean anything."""
    from shardlab.autograder.kit.toy_models import build_model
    p = _args(case)["world_size"]
    model = build_model(MODEL, 0)
    fixed = sum(t.numel() for t in model.parameters() if not t.requires_grad)
    fixed += sum(b.numel() for b in model.buffers())
    shares = [math.ceil(n / p) for n in _units()]
    return [dict(budget=sum(shares) + fixed, units=len(_units()), shares=shares)]


def _expected_collectives(case):
    p = _args(case)["world_size"]
    padded = [math.ceil(n / p) * p * FP32_BYTES for n in _units()]
    volume = sum(ref.step_comm_bytes(n, p, 1) for n in padded)
    return [dict(unit_bytes=sorted(padded), volume=volume, p=p)]


def _run_part(id, title, points, compare, expect, description, runs=RUNS, misconceptions=(),
              function=None, bonus=False, drawn=None) -> Part:
    return Part(id=id, title=title, module=M, points=points, probe="gloo", function=function,
                cases=lambda cfg, rng: _run_cases(cfg, rng, runs), expect=expect, compare=compare,
                misconceptions=misconceptions, description=description, bonus=bonus, drawn=drawn)


RUN_PARTS = (
    _run_part("2.7", "FSDP trains like one process", 4, FSDP_TRAINS_LIKE_ONE_PROCESS, _single_process,
              "2 and 3 gloo ranks, SGD and AdamW, 3 steps: at every step each shard's .grad right after "
              "finish_gradient_synchronization() is its slice of the one-process gradient of the mean loss, "
              "and full_state_dict() equals single-process full-batch training (weights and gradients: FP32, "
              "tolerance 1e-5 + 1e-4·|w|)",
              misconceptions=(Misconception("sum", "matches summing the gradients instead of averaging: "
                                            "divide the reduce-scattered gradient by the world size",
                                            lambda case: _single_process(case, _args(case)["world_size"])),),
              function="FSDP"),
    _run_part("2.8", "sharded storage", 2, FSDP_STORAGE, _storage_budget,
              "between steps each rank keeps at most ceil(P/p) parameter elements per unit, each unit's "
              "shard checked against its share (measured from the tensors reachable from the FSDP object)"),
    _run_part("2.9", "collectives and volume", 3, FSDP_COLLECTIVES, _expected_collectives,
              # which collectives a step needs is Task 2.6's to derive: the handout's table does not say
              "per step and unit: only the collectives full sharding needs, each of the padded flat "
              "size; total volume = Σ step_comm_bytes"),
    _run_part("2.10", "agrees with fully_shard", 2, TRAINS_LIKE_ONE_PROCESS, _fully_shard,
              "final weights equal PyTorch's own FSDP2 (fully_shard) on the same model and data",
              # an SGD run in public: summed gradients show there (AdamW hides them but for eps), so the
              # kit catches 2.10's loss first; the student's runs are 2.7's, shared
              runs=(RUNS[0], RUNS[1], RUNS[2])),
    _run_part("2.11", "prefetch (bonus)", 1, FSDP_PREFETCH, lambda case: [None],
              "the next unit's all-gather is issued, async, before the current unit's forward finishes",
              bonus=True, drawn=Drawn("fsdp", "1", "overlap")),
)

WRITTEN = (
    written_part("2.a", M, "(a) written: one layer as the FSDP unit",
                 "in writeup.md, graded by hand: your calculations and a one-sentence answer to (a)"),
)



def _degenerate(cfg) -> str | None:
    """(a) on a network of p = 1 device: nothing is all-gathered (the whole time is 0, docs/spec.md,
    question 2), so there is nothing to hide and no token count to find (Task 2.5 is for p >= 2)."""
    f = cfg.fsdp
    alone = [where for where, p in (("within a node", f.intra_devices), ("across nodes", f.inter_devices))
             if p == 1]
    if not alone:
        return None
    return (f"2 (a): with p = 1 device {' and '.join(alone)} there is nothing to all-gather: the "
            "all-gather takes no time, so it is hidden at any number of tokens and no token count is needed"
            + (", and a rank receives nothing per step" if f.inter_devices == 1 else ""))


QUESTION = Question(number=2, module=M, title="FSDP", template="fsdp.md.j2",
                    parts=ANALYTIC + RUN_PARTS + WRITTEN, worked=ref.worked, figures=FIGURES,
                    degenerate=_degenerate)
