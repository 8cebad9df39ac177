"""Question 6 — tensor parallelism, the answer key (examples/tp-course/README.md, "The question").

Megatron-style linear layers Y = X · W over t devices, X of T tokens by d_in
values, W of d_in by d_out, BF16 on the wire (b = 2 bytes per value):

- column-parallel: each device holds W[:, d_out/t] and the whole X, and
  computes its columns of Y; the forward needs no collective, the backward
  all-reduces dX (T x d_in) over the t devices;
- row-parallel: each device holds W[d_in/t, :] and its columns of X (the
  column layer's output), and computes a partial Y; the forward all-reduces
  Y (T x d_out), the backward needs no collective.

Collectives follow the ring model over p devices, on a payload of S bytes
(the whole tensor: the gathered one, or the one before reducing): an
all-gather or a reduce-scatter sends (p-1)/p · S bytes per device in p-1
steps, an all-reduce (a reduce-scatter then an all-gather) twice that in
2(p-1) steps; each step costs alpha seconds, each byte 1/beta seconds.

Part 6.5 is question 3's 2D-sharded block, In[B_X, D_Y] · W_in[D_X, F_Y] ·
W_out[F_Y, D_X] -> Out[B_X, D_Y] on an X x Y mesh, run by the students:
`forward_2d_collectives` lists what its trace must show.
"""
from __future__ import annotations

import math

from shardlab.reference.derivation import Worked, n, sci

OPS = ("all_gather", "reduce_scatter", "all_reduce")
BF16 = 2


def collective_bytes(op: str, payload_bytes: float, p: int) -> float:
    """Bytes one device sends: (p-1)/p · S for an all-gather or a reduce-scatter,
    2 (p-1)/p · S for an all-reduce; 0 on one device."""
    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}")
    share = (p - 1) / p * payload_bytes
    return 2 * share if op == "all_reduce" else share


def collective_seconds(op: str, payload_bytes: float, p: int, alpha: float, beta: float) -> float:
    """(p-1) · alpha + collective_bytes / beta, with 2 (p-1) steps for an all-reduce."""
    steps = (p - 1) * (2 if op == "all_reduce" else 1)
    return steps * alpha + collective_bytes(op, payload_bytes, p) / beta


def layer_collectives(layer: str, tokens: int, d_in: int, d_out: int, bytes_per_value: int) -> dict:
    """{"forward": [op, payload bytes] or None, "backward": ...} of a Megatron linear layer:
    column-parallel all-reduces dX (T · d_in · b) in backward, row-parallel Y (T · d_out · b) in forward."""
    if layer == "column":
        return {"forward": None, "backward": ["all_reduce", tokens * d_in * bytes_per_value]}
    if layer == "row":
        return {"forward": ["all_reduce", tokens * d_out * bytes_per_value], "backward": None}
    raise ValueError(f"unknown layer {layer!r}: 'column' or 'row'")


def compute_bound_tokens(d_in: int, d_out: int, t: int, flops_per_second: float, alpha: float, beta: float,
                         bytes_per_value: int) -> int | None:
    """The fewest tokens T >= 1 for which a row-parallel layer's forward matmul,
    2 T d_in d_out / (t C) seconds, takes at least as long as its all-reduce of
    Y, 2 (t-1) alpha + 2 (t-1)/t · T d_out b / beta: T = ceil(2 (t-1) alpha / g)
    with g = 2 d_in d_out / (t C) - 2 (t-1) d_out b / (t beta), the per-token
    margin; None when g <= 0 (no batch hides the all-reduce); 1 when t = 1."""
    margin = 2 * d_in * d_out / (t * flops_per_second) - 2 * (t - 1) * d_out * bytes_per_value / (t * beta)
    if t == 1:
        return 1
    if margin <= 0:
        return None
    return max(1, math.ceil(2 * (t - 1) * alpha / margin))


def forward_2d_collectives(tokens: int, d_model: int, d_ff: int, x: int, y: int,
                           bytes_per_value: int = BF16) -> list[list]:
    """[tensor, op, mesh axis, payload bytes] of each collective of the 2D-sharded
    block's forward, per chip: all-gather In along y (the gathered In[B_X, D]),
    all-gather W_in along x (W_in[D, F_Y]), all-gather W_out along x
    (W_out[F_Y, D]), reduce-scatter Out along y (the partial Out[B_X, D])."""
    b = bytes_per_value
    activations, weights = tokens // x * d_model * b, d_model * d_ff // y * b
    return [["In", "all_gather", "y", activations], ["W_in", "all_gather", "x", weights],
            ["W_out", "all_gather", "x", weights], ["Out", "reduce_scatter", "y", activations]]


def worked(cfg) -> dict[str, Worked]:
    """One FFN block of the course model, Megatron-sharded over the course's intra-node network
    ([fsdp] intra_network: alpha, beta, and its devices as t) on its GPU ([memory] gpu: C)."""
    d, f, tokens = cfg.model.d_model, cfg.model.d_ff, cfg.memory.tokens_per_device
    net, t, c = cfg.fsdp.intra_network, cfg.fsdp.intra_devices, cfg.memory.gpu.flops_per_second
    payload = tokens * d * BF16
    sent = collective_bytes("all_reduce", payload, t)
    seconds = collective_seconds("all_reduce", payload, t, net.alpha, net.beta)
    compute = 2 * tokens * f * d / (t * c)
    fewest = compute_bound_tokens(f, d, t, c, net.alpha, net.beta, BF16)
    return {
        "payload": Worked("payload of the row-parallel layer's all-reduce", "T · D · 2",
                          f"{n(tokens)} · {n(d)} · 2", payload, f"{n(payload)} bytes"),
        "sent": Worked("bytes each device sends in that all-reduce", "2 (t-1)/t · S",
                       f"2 · {t - 1}/{t} · {n(payload)}", sent, f"{n(sent)} bytes"),
        "seconds": Worked(f"time of that all-reduce on {net.name}", "2 (t-1) α + 2 (t-1)/t · S / β",
                          f"2 · {t - 1} · {sci(net.alpha)} + {n(sent)} / {sci(net.beta)}", seconds,
                          f"{seconds * 1e6:.1f} µs"),
        "compute": Worked(f"time of the row-parallel layer's forward matmul on {cfg.memory.gpu.name}",
                          "2 T F D / (t C)", f"2 · {n(tokens)} · {n(f)} · {n(d)} / ({t} · {sci(c)})", compute,
                          f"{compute * 1e6:.1f} µs"),
        "fewest": Worked("fewest tokens for which the row-parallel layer is compute bound",
                         "⌈2 (t-1) α / (2 F D / (t C) - 2 (t-1) D b / (t β))⌉",
                         f"F = {n(f)}, D = {n(d)}, t = {t}, α = {sci(net.alpha)}, β = {sci(net.beta)}, C = {sci(c)}",
                         fewest, "never" if fewest is None else f"{n(fewest)} tokens"),
    }
