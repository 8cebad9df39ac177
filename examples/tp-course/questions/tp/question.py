"""Question 6 — tensor parallelism: Megatron's column- and row-parallel layers, and the
2D (FSDP x TP) forward of one FFN block run on a 2 x 2 gloo mesh. The spec is
examples/tp-course/README.md, "The question". A course's own question: it imports
only public names of the core, the registry, the kit and its own reference.
"""
from __future__ import annotations

from shardlab.autograder.core.parts import REAL, Call, Case, Compare, Part, function_part
from shardlab.autograder.kit.checks.tp import FORWARD_2D
from shardlab.autograder.questions import Question
from shardlab.reference import tp as ref

M = "tp"
OPS = ref.OPS


# ---- case generators: (args, public, note) ---------------------------------

def _collective_args(cfg, rng):
    t = cfg.fsdp.intra_devices
    payload = cfg.memory.tokens_per_device * cfg.model.d_model * 2
    yield dict(op="all_gather", payload_bytes=1000, p=4), True, "a small example"
    yield dict(op="all_reduce", payload_bytes=1000, p=4), True, "a small example"
    for op in OPS:
        yield dict(op=op, payload_bytes=payload, p=t), False, "the course model's activations"
        yield dict(op=op, payload_bytes=payload, p=1), False, "edge case: one device"
    for _ in range(3):
        yield dict(op=rng.choice(OPS), payload_bytes=rng.randint(1, 10**10), p=rng.randint(2, 64)), False, ""


def _time_args(cfg, rng):
    net, t = cfg.fsdp.intra_network, cfg.fsdp.intra_devices
    payload = cfg.memory.tokens_per_device * cfg.model.d_model * 2
    yield dict(op="reduce_scatter", payload_bytes=1000, p=4, alpha=1e-6, beta=1e9), True, "a small example"
    for op in OPS:
        yield (dict(op=op, payload_bytes=payload, p=t, alpha=net.alpha, beta=net.beta), False,
               "the course model on its network")
        yield dict(op=op, payload_bytes=payload, p=1, alpha=net.alpha, beta=net.beta), False, "edge case: one device"
    for _ in range(3):
        yield (dict(op=rng.choice(OPS), payload_bytes=rng.randint(1, 10**10), p=rng.randint(2, 64),
                    alpha=rng.choice([1e-6, 5e-6, 2e-5]), beta=rng.choice([5e10, 1e11, 4.5e11])), False, "")


def _layer_args(cfg, rng):
    m = cfg.model
    yield dict(layer="column", tokens=4, d_in=8, d_out=16, bytes_per_value=2), True, "a small example"
    yield dict(layer="row", tokens=4, d_in=16, d_out=8, bytes_per_value=2), True, "a small example"
    yield dict(layer="column", tokens=cfg.memory.tokens_per_device, d_in=m.d_model, d_out=m.d_ff, bytes_per_value=2), \
        False, "the course model"
    yield dict(layer="row", tokens=cfg.memory.tokens_per_device, d_in=m.d_ff, d_out=m.d_model, bytes_per_value=2), \
        False, "the course model"
    for _ in range(3):
        yield dict(layer=rng.choice(["column", "row"]), tokens=rng.randint(1, 8192), d_in=128 * rng.randint(1, 256),
                   d_out=128 * rng.randint(1, 256), bytes_per_value=rng.choice([2, 4])), False, ""


def _bound_args(cfg, rng):
    net, t, c = cfg.fsdp.intra_network, cfg.fsdp.intra_devices, cfg.memory.gpu.flops_per_second
    m = cfg.model
    yield dict(d_in=4096, d_out=1024, t=4, flops_per_second=1e12, alpha=1e-6, beta=1e10, bytes_per_value=2), \
        True, "a small example"
    yield dict(d_in=m.d_ff, d_out=m.d_model, t=t, flops_per_second=c, alpha=net.alpha, beta=net.beta,
               bytes_per_value=2), False, "the course model on its network"
    yield dict(d_in=1024, d_out=1024, t=8, flops_per_second=1e15, alpha=5e-6, beta=1e10, bytes_per_value=2), \
        False, "edge case: never compute bound"
    yield dict(d_in=m.d_ff, d_out=m.d_model, t=1, flops_per_second=c, alpha=net.alpha, beta=net.beta,
               bytes_per_value=2), False, "edge case: one device"
    for _ in range(3):
        yield dict(d_in=128 * rng.randint(8, 512), d_out=128 * rng.randint(8, 512), t=rng.choice([2, 4, 8]),
                   flops_per_second=rng.choice([3.12e14, 9.89e14]), alpha=rng.choice([1e-6, 5e-6]),
                   beta=rng.choice([1e11, 4.5e11]), bytes_per_value=2), False, ""


# ---- 6.5: the 2D forward on a 2 x 2 gloo mesh -------------------------------

MESH_SHAPES = ((4, 8, 16), (8, 4, 16), (4, 8, 8))     # (tokens, d_model, d_ff) on X = Y = 2


def _forward_cases(cfg, rng):
    return [Case((Call(M, "tp_forward_2d", dict(world_size=4, tokens=t, d_model=d, d_ff=f,
                                                 seed=cfg.course.seed % 1000 + k)),),
                 public=k == 0, note="a BF16 block on a 2 x 2 gloo mesh")
            for k, (t, d, f) in enumerate(MESH_SHAPES)]


def _forward_expect(case: Case) -> list:
    a = case.calls[0].args
    return [ref.forward_2d_collectives(a["tokens"], a["d_model"], a["d_ff"], 2, 2)]


def _bytes_not_bits(op, payload_bytes, p):
    return 8 * ref.collective_bytes(op, payload_bytes, p)


def _all_reduce_as_gather(op, payload_bytes, p):
    return ref.collective_bytes("all_gather" if op == "all_reduce" else op, payload_bytes, p)


def _one_step(op, payload_bytes, p, alpha, beta):
    return alpha + ref.collective_bytes(op, payload_bytes, p) / beta


def _swapped(layer, tokens, d_in, d_out, bytes_per_value):
    return ref.layer_collectives("row" if layer == "column" else "column", tokens, d_in, d_out, bytes_per_value)


QUESTION = Question(number=6, module=M, title="Tensor parallelism", template="tp.md.j2", worked=ref.worked, parts=(
    function_part("6.1", M, "collective_bytes", ref.collective_bytes, 2, _collective_args, compare=REAL,
                  misconceptions=(("bits", "counts bits, not bytes", _bytes_not_bits),
                                  ("all-reduce as one pass", "moves an all-reduce's bytes once: it is a "
                                   "reduce-scatter then an all-gather, so it sends twice (p-1)/p of the payload",
                                   _all_reduce_as_gather)),
                  description="bytes one device sends in a ring collective"),
    function_part("6.2", M, "collective_seconds", ref.collective_seconds, 2, _time_args, compare=REAL,
                  misconceptions=(("one latency", "pays alpha once: a ring collective pays it at every one of its "
                                   "steps", _one_step),),
                  description="time of a ring collective, alpha-beta model"),
    function_part("6.3", M, "layer_collectives", ref.layer_collectives, 2, _layer_args, compare=Compare("exact"),
                  misconceptions=(("column and row swapped", "swaps the layers: the column-parallel layer needs its "
                                   "all-reduce in the backward pass, the row-parallel one in the forward", _swapped),),
                  description="the collectives of a column- or row-parallel layer, forward and backward"),
    function_part("6.4", M, "compute_bound_tokens", ref.compute_bound_tokens, 2, _bound_args,
                  compare=Compare("int_or_none"), description="fewest tokens for which a row-parallel layer is "
                                                               "compute bound"),
    Part(id="6.5", title="the 2D forward on a 2 x 2 mesh", module=M, points=4, probe="gloo",
         function="ffn_forward_2d", cases=_forward_cases, expect=_forward_expect, compare=FORWARD_2D,
         description=("your ffn_forward_2d on a 2 x 2 gloo mesh: its collectives traced per mesh axis with their "
                      "bytes, and its Out block against the single-process forward")),
))
