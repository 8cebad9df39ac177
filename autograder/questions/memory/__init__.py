"""Question 1 — memory accounting. docs/spec.md, question 1."""
from __future__ import annotations

import math

from shardlab.autograder.core.casegen import model_shapes
from shardlab.autograder.core.parts import (EXACT_INT, REAL, Call, Case, Compare, Part, function_part,
                                               written_part)
from shardlab.autograder.questions import Question
from shardlab.reference import memory as ref
from shardlab.reference.memory_measure import measure_training_step
from shardlab.reference.specs import GB, HARDWARE

M = "memory"
GIB = 2**30

# ---- case generators: (args, public, note) ---------------------------------


def _param_args(cfg, rng):
    m = cfg.model
    # the course model's values are the handout's answers: hidden (docs/spec.md, "public cases")
    yield dict(d_model=m.d_model, d_ff=m.d_ff, num_blocks=m.num_blocks), False, "the course model"
    yield dict(d_model=8, d_ff=24, num_blocks=3), True, "a tiny model"
    for d, f, layers in model_shapes(rng, 6):
        yield dict(d_model=d, d_ff=f, num_blocks=layers), False, ""


def _state_args(cfg, rng):
    m = cfg.model
    yield dict(num_params=ref.param_count(m.d_model, m.d_ff, m.num_blocks)), False, "the course model"
    yield dict(num_params=1), True, ""
    yield dict(num_params=0), False, "edge case: no parameters"
    for _ in range(5):
        yield dict(num_params=rng.randint(1, 10**12)), False, ""


def _activation_args(cfg, rng):
    m = cfg.model
    yield (dict(d_model=m.d_model, d_ff=m.d_ff, num_blocks=m.num_blocks, tokens=cfg.memory.tokens_per_device),
           False, "the course model")
    yield dict(d_model=8, d_ff=24, num_blocks=3, tokens=5), True, "a tiny model"
    yield dict(d_model=m.d_model, d_ff=m.d_ff, num_blocks=m.num_blocks, tokens=0), False, "edge case: tokens = 0"
    for d, f, layers in model_shapes(rng, 5):
        yield dict(d_model=d, d_ff=f, num_blocks=layers, tokens=rng.randint(1, 2**20)), False, ""


def _course_totals(cfg):
    m = cfg.model
    state = ref.training_state_bytes(ref.param_count(m.d_model, m.d_ff, m.num_blocks))
    act = ref.activation_bytes(m.d_model, m.d_ff, m.num_blocks, cfg.memory.tokens_per_device)
    return state, act


FLOAT_DIVISION_MSG = ("matches a float division rounded up: past 2^53 a float cannot tell one byte more, so "
                      "count the devices in integers")
EXACT_PAST_2_53 = "edge case: one byte past a whole number of devices, beyond 2^53"


def _devices_args(cfg, rng):
    state, act = _course_totals(cfg)
    gpu = cfg.memory.gpu.capacity_bytes
    yield dict(total_bytes=state + act, device_bytes=gpu), False, f"the course model on {cfg.memory.gpu.name}"
    yield dict(total_bytes=state, device_bytes=gpu), False, "training state only"
    yield dict(total_bytes=250 * 10**9, device_bytes=80 * 10**9), True, ""
    yield dict(total_bytes=160 * 10**9, device_bytes=80 * 10**9), False, "edge case: exactly two devices"
    yield dict(total_bytes=1, device_bytes=80 * 10**9), False, "edge case: one byte"
    yield dict(total_bytes=0, device_bytes=80 * 10**9), False, "edge case: nothing to store"
    yield dict(total_bytes=0, device_bytes=24 * 10**9), True, "edge case: nothing to store"
    for _ in range(5):
        yield (dict(total_bytes=rng.randint(10**9, 10**14),
                    device_bytes=rng.choice(list(HARDWARE.values())).capacity_bytes), False, "")
    # "computed exactly": a float quotient rounds past 2^53, so one byte over whole devices is lost. Last: here
    # GiB for GB, floor for ceil and a float division all give the same value, which feedback cannot name
    yield dict(total_bytes=10**18 + 1, device_bytes=10**18), True, EXACT_PAST_2_53
    yield dict(total_bytes=2**60 + 1, device_bytes=2**59), False, EXACT_PAST_2_53


def _fsdp_bytes_args(cfg, rng):
    state, act = _course_totals(cfg)
    yield dict(state_bytes=state, activation_bytes=act, n_fsdp=64), False, "the course model, N = 64"
    yield dict(state_bytes=16 * 10**9, activation_bytes=4 * 10**9, n_fsdp=8), True, ""
    yield dict(state_bytes=state, activation_bytes=act, n_fsdp=1), False, "edge case: N = 1"
    for _ in range(5):
        yield (dict(state_bytes=rng.randint(10**9, 10**13), activation_bytes=rng.randint(0, 10**12),
                    n_fsdp=rng.randint(1, 4096)), False, "")


def _min_fsdp_args(cfg, rng):
    state, act = _course_totals(cfg)
    cap = cfg.memory.fsdp_device.capacity_bytes
    yield (dict(state_bytes=state, activation_bytes=act, device_bytes=cap), False,
           f"the course model on {cfg.memory.fsdp_device.name}")
    yield dict(state_bytes=10**12, activation_bytes=10**10, device_bytes=80 * 10**9), True, ""
    # an example device, not the course's
    yield (dict(state_bytes=10**12, activation_bytes=200 * 10**9, device_bytes=80 * 10**9), True,
           "edge case: no FSDP degree fits")
    yield dict(state_bytes=state, activation_bytes=2 * cap - 2, device_bytes=cap), False, "edge case: barely fits"
    # an example of the same shape: N = 10**15 + 8 * 10**10, a degree no search over N reaches in time
    yield (dict(state_bytes=10**15, activation_bytes=160 * 10**9 - 2, device_bytes=80 * 10**9), True,
           "edge case: barely fits")
    # exact tie: (100 + 20)/n + 20 < 80 needs n > 2, so n = 3 (n = 2 gives exactly 80)
    yield dict(state_bytes=100, activation_bytes=40, device_bytes=80), False, "edge case: equality is not enough"
    # "strictly less", shown: (76 + 4)/4 + 4 = 24 GB exactly at n = 4, so n = 5
    yield (dict(state_bytes=76 * 10**9, activation_bytes=8 * 10**9, device_bytes=24 * 10**9), True,
           "edge case: equality is not enough")
    # act/2 = the device's capacity: nothing is left for the sharded state at any degree
    yield (dict(state_bytes=10**9, activation_bytes=48 * 10**9, device_bytes=24 * 10**9), True,
           "edge case: half the activations fill the device")
    yield (dict(state_bytes=state, activation_bytes=2 * cap, device_bytes=cap), False,
           "edge case: half the activations fill the device")
    yield dict(state_bytes=10, activation_bytes=0, device_bytes=80), False, "edge case: fits on one device"
    for _ in range(5):
        s, c = rng.randint(10**10, 10**13), rng.choice([16, 80, 95]) * 10**9
        yield dict(state_bytes=s, activation_bytes=rng.randint(0, c), device_bytes=c), False, ""


def _zero_args(cfg, rng):
    m = cfg.model
    p = ref.param_count(m.d_model, m.d_ff, m.num_blocks)
    for stage in range(4):
        yield dict(num_params=p, stage=stage, n_dp=64), False, f"the course model, stage {stage}"
    for stage in range(4):          # every stage's rule shown, "stage 0 shards nothing" included
        yield dict(num_params=10**9, stage=stage, n_dp=8), True, ""
    for _ in range(6):
        yield (dict(num_params=rng.randint(1, 10**11), stage=rng.randint(0, 3), n_dp=rng.randint(1, 1024)),
               False, "")


# ---- misconceptions: the wrong function each mistake amounts to --------------

def _gib_devices(total_bytes, device_bytes):
    # total converted to "GB" with 2**30 but the capacity quoted in 1e9-byte GB
    return math.ceil(total_bytes / GIB / (device_bytes / 1e9))


GIB_MSG = ("matches mixing GiB (2^30 bytes) with GB: device capacities are in GB = 10^9 bytes "
           "(this course's {gpu}, {gpu_gb} GB, holds {gpu_bytes} bytes, not {gpu_gb} · 2^30)")
FLOOR_MSG = ("matches rounding down: a part of a device's worth of bytes still needs a whole device, "
             "so round up (ceil)")
ALL_SHARDED_MSG = ("matches sharding all activations: only every second layer's activations are "
                   "sharded; the other half stays replicated on every device")
OUTPUT_TWICE_MSG = ("matches counting each block's output as well as its inputs: a block's output is "
                    "the next block's input, saved once, and the last block's output is not saved")
REVERSED_ZERO_MSG = ("matches ZeRO's stages in the reverse order, the weights sharded first: stage 1 shards "
                     "the optimizer state, stage 2 adds the gradients, stage 3 the weights")


def _output_counted_twice(d_model, d_ff, num_blocks, tokens):
    # each block's output (tokens x d_model) counted again beside the next block's input
    return num_blocks * tokens * (2 * d_model + d_ff) * 2


def _zero_reversed(num_params, stage, n_dp):
    # stage s shards the first s of (weights 2P, gradients 2P, optimizer 12P): the model's order
    pieces = (2 * num_params, 2 * num_params, 12 * num_params)
    if stage not in range(4):
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage}")
    return sum(b / n_dp if k < stage else b for k, b in enumerate(pieces))

PARTS = (
    function_part("1.1", M, "param_count", ref.param_count, 1, _param_args, EXACT_INT,
                  description="parameters of the FFN-only model"),
    function_part("1.2", M, "training_state_bytes", ref.training_state_bytes, 1, _state_args, EXACT_INT,
                  misconceptions=(
                      ("12 bytes/param", "matches 12 bytes/param: count every FP32 copy the training state "
                       "holds, the master weights, the accumulated gradients and each Adam moment",
                       lambda p: 12 * p),
                      ("20 bytes/param", "matches 20 bytes/param: the training state here is the FP32 "
                       "weights, gradients and two moments only; no extra BF16 copy is counted",
                       lambda p: 20 * p),
                      ("weight casts counted", "matches 18 bytes/param, the training state with autocast's "
                       "BF16 weight casts added: autograd saves those casts for backward, but they are a "
                       "term of their own, outside the training state", lambda p: 18 * p),
                  ), description="FP32 training state"),
    function_part("1.3", M, "activation_bytes", ref.activation_bytes, 2, _activation_args, EXACT_INT,
                  misconceptions=(
                      ("activations in FP32", "matches activations stored in FP32 (4 bytes): they are "
                       "BF16, 2 bytes per value", lambda d, f, layers, t: 2 * ref.activation_bytes(d, f, layers, t)),
                      ("block output counted twice", OUTPUT_TWICE_MSG, _output_counted_twice),
                  ), description="BF16 activations saved for backward"),
    function_part("1.4", M, "devices_needed", ref.devices_needed, 1, _devices_args, EXACT_INT,
                  misconceptions=(("GiB for GB", GIB_MSG, _gib_devices),
                                  ("floor for ceil", FLOOR_MSG, lambda total, device: int(total // device)),
                                  ("float division", FLOAT_DIVISION_MSG,
                                   lambda total, device: math.ceil(total / device))),
                  description="devices needed to hold a number of bytes"),
    function_part("1.5", M, "fsdp_bytes_per_device", ref.fsdp_bytes_per_device, 2, _fsdp_bytes_args, REAL,
                  misconceptions=(("all activations sharded", ALL_SHARDED_MSG,
                                   lambda s, a, k: (s + a) / k),),
                  description="memory per device under FSDP"),
    function_part("1.6", M, "min_fsdp_degree", ref.min_fsdp_degree, 2, _min_fsdp_args, Compare("int_or_none"),
                  misconceptions=(("all activations sharded", ALL_SHARDED_MSG,
                                   lambda s, a, c: math.floor((s + a) / c) + 1),
                                  ("GiB for GB", GIB_MSG,
                                   lambda s, a, c: ref.min_fsdp_degree(s, a, c * GIB / 1e9))),
                  description="smallest FSDP degree that fits one device"),
    function_part("1.7", M, "zero_bytes_per_device", ref.zero_bytes_per_device, 2, _zero_args, REAL,
                  misconceptions=(("12 bytes/param", "matches 12 bytes/param in total: with mixed "
                                   "precision the BF16 weights and gradients come on top of the "
                                   "K = 12 optimizer bytes",
                                   lambda p, st, k: 0.75 * ref.zero_bytes_per_device(p, st, k)),
                                  ("stages in reverse order", REVERSED_ZERO_MSG, _zero_reversed)),
                  description="memory per device under ZeRO stages 0-3"),
)


# ---- 1.8: the formulas against a real training step --------------------------
# The measurement (`reference.memory_measure`) sorts every byte the step keeps into named
# terms; the student's formulas are graded on the state and the activations, their meaning
# unchanged. The weight casts and AdamW's step counters, terms of their own, are checked
# against the reference's formulas by tests/test_reference_memory.py.

REAL_RUN_SHAPES = ((8, 24, 3, 5), (16, 40, 2, 7), (24, 64, 4, 3))


def _real_run_cases(cfg, rng):
    out = []
    for i, (d, f, layers, t) in enumerate(REAL_RUN_SHAPES):
        measured = measure_training_step(d, f, layers, t)
        calls = (Call(M, "param_count", dict(d_model=d, d_ff=f, num_blocks=layers)),
                 Call(M, "training_state_bytes", dict(num_params=measured.num_params)),
                 Call(M, "activation_bytes", dict(d_model=d, d_ff=f, num_blocks=layers, tokens=t)))
        out.append(Case(calls, public=i == 0, note="measured from a real autocast BF16 step with AdamW"))
    return out


def _real_run_expect(case: Case) -> list:
    args = case.calls[2].args
    m = measure_training_step(args["d_model"], args["d_ff"], args["num_blocks"], args["tokens"])
    return [m.num_params, m.state_bytes, m.activation_bytes]


REAL_RUN = Part(
    id="1.8", title="real-run check", module=M, points=3,
    cases=_real_run_cases, expect=_real_run_expect, compare=EXACT_INT,
    description=("a real mixed-precision step on a tiny FFN (a torch.autocast BF16 forward and backward, "
                 "a torch.optim.AdamW step): parameter elements, bytes of FP32 weights + gradients + AdamW "
                 "moments, and bytes autograd saved for backward other than autocast's BF16 weight casts "
                 "(a term of their own) must equal param_count, training_state_bytes and activation_bytes"),
)

WRITTEN = (
    written_part("1.a", M, "(a) written: one device's worth",
                 "in writeup.md, graded by hand: your calculation and a one-sentence answer to (a)"),
    written_part("1.b", M, "(b) written: sharding with FSDP",
                 "in writeup.md, graded by hand: your calculation and a one-sentence answer to (b)"),
)


def _degenerate(cfg) -> str | None:
    """(b) has no answer when the replicated half of the activations alone fills the device:
    (S + A/2)/N + A/2 > A/2 >= capacity at every N (docs/spec.md, question 1)."""
    state, act = _course_totals(cfg)
    dev = cfg.memory.fsdp_device
    if ref.min_fsdp_degree(state, act, dev.capacity_bytes) is not None:
        return None
    return (f"1 (b): no FSDP degree fits one {dev.name} ({dev.capacity_gb:g} GB): the replicated half of "
            f"the activations alone is {act / 2 / GB:,.2f} GB")


QUESTION = Question(number=1, module=M, title="Memory accounting", template="memory.md.j2",
                    parts=PARTS + (REAL_RUN, *WRITTEN), worked=ref.worked, degenerate=_degenerate)
