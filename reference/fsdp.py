"""Question 2 — FSDP, the analytic part: the lecture's alpha-beta model of one
FSDP unit (one layer), as an answer key. A reference FSDP class, the
behaviour a student's must match, is in `fsdp_module` (the tests
grade it like a submission).

Symbols: unit_params (parameters of one unit), p (devices), alpha (latency,
s), beta (bandwidth, bytes/s), C (FLOP/s), b (bytes per parameter on the
wire, 2 for BF16). While unit i computes its forward, unit i+1's all-gather
runs; it is hidden when all-gather time <= forward time.
"""
from __future__ import annotations

import math

from shardlab.reference.derivation import Worked, n, sci


def allgather_seconds(unit_bytes: float, p: int, alpha: float, beta: float) -> float:
    """alpha * log2(p) + unit_bytes / beta; a single device gathers nothing (0)."""
    if p == 1:
        return 0.0
    return alpha * math.log2(p) + unit_bytes / beta


def standard_allgather_seconds(unit_bytes: float, p: int, alpha: float, beta: float) -> float:
    """The literature's all-gather (recursive doubling; Thakur, Rabenseifner and Gropp,
    2005): alpha * log2(p) + (p-1)/p * unit_bytes / beta, each device receiving the
    (p-1)/p of the bytes it lacks (a ring pays (p-1) * alpha for the same bandwidth
    term). 0 at p = 1 by itself. Not graded: the course's model (`allgather_seconds`)
    drops the (p-1)/p factor, which is why it needs its p = 1 rule; the solutions
    set the two side by side."""
    return alpha * math.log2(p) + (p - 1) / p * unit_bytes / beta


def node_egress_beta(beta_per_device: float, devices_per_node: int) -> float:
    """The bandwidth per device of an all-gather across nodes as NCCL runs it on nodes with one NIC per
    device of beta_per_device each: rail-aligned rings (one ring per rail, the node's k-th NIC joined to
    every other node's k-th) cross each node boundary once per byte, with the node's NICs carrying its
    rings side by side, so the bandwidth term runs at the node's egress, devices_per_node * beta. The
    Scaling Book's GPU chapter uses it (400 GB/s for 8 x 400 Gb/s). Not graded: the course's
    inter-node model is a flat ring at each device's own beta (docs/decisions.md); the solutions set
    the two side by side."""
    return devices_per_node * beta_per_device


def forward_seconds(tokens: int, unit_params: int, flops_per_second: float) -> float:
    """2 FLOPs per parameter per token: 2 * tokens * unit_params / C."""
    return 2 * tokens * unit_params / flops_per_second


def is_communication_bound(tokens: int, unit_params: int, p: int, alpha: float, beta: float,
                           flops_per_second: float, bytes_per_param: int = 2) -> bool:
    """The next unit's all-gather takes at least as long as this unit's forward."""
    gather = allgather_seconds(unit_params * bytes_per_param, p, alpha, beta)
    return gather >= forward_seconds(tokens, unit_params, flops_per_second)


def max_devices_before_comm_bound(tokens: int, unit_params: int, alpha: float, beta: float,
                                  flops_per_second: float, bytes_per_param: int = 2) -> float:
    """Largest real p with alpha * log2(p) <= (2 tokens / C - b / beta) * unit_params:
    p = 2 ** (rhs / alpha). 1.0 when rhs <= 0 (even the bandwidth term alone
    cannot hide); math.inf past float range (or alpha = 0)."""
    rhs = (2 * tokens / flops_per_second - bytes_per_param / beta) * unit_params
    if rhs <= 0:
        return 1.0
    if alpha == 0:
        return math.inf
    try:
        return 2.0 ** (rhs / alpha)
    except OverflowError:
        return math.inf


def min_tokens_to_hide_allgather(unit_params: int, p: int, alpha: float, beta: float,
                                 flops_per_second: float, bytes_per_param: int = 2) -> float:
    """Tokens per device at which forward time equals all-gather time:
    C/2 * (alpha * log2(p) / unit_params + b / beta)."""
    return flops_per_second / 2 * (alpha * math.log2(p) / unit_params + bytes_per_param / beta)


def step_comm_bytes(num_params: int, p: int, bytes_per_param: int = 2) -> float:
    """Bytes each rank receives per step under full sharding: all-gather in
    forward, all-gather in backward and reduce-scatter of the gradients, each
    (p-1)/p of the parameters: 3 * (p-1)/p * num_params * b."""
    return 3 * (p - 1) / p * num_params * bytes_per_param


def worked(cfg) -> dict[str, Worked]:
    """One XXL layer as the FSDP unit, on each of the course's two networks."""
    f = cfg.fsdp
    d, ff = cfg.model.d_model, cfg.model.d_ff
    unit = d * ff
    c, t, b = f.device.flops_per_second, f.tokens_per_device, 2
    fwd = forward_seconds(t, unit, c)
    out = {
        "unit": Worked("parameters of one unit (one linear layer)", "D · F", f"{n(d)} · {n(ff)}",
                       unit, f"{n(unit)} parameters ({n(unit * b)} bytes in BF16)"),
        "forward": Worked(f"forward time of one unit on {f.device.name}", "2 · T · P_unit / C",
                          f"2 · {n(t)} · {n(unit)} / {sci(c)}", fwd, f"{fwd * 1e3:.3f} ms"),
    }
    # the role comes from the config key ([fsdp] intra_network / inter_network), never from the network's
    # name, which is only a label (docs/instructor-guide.md)
    for key, net, p in (("intra", f.intra_network, f.intra_devices), ("inter", f.inter_network, f.inter_devices)):
        ag = allgather_seconds(unit * b, p, net.alpha, net.beta)
        bound = is_communication_bound(t, unit, p, net.alpha, net.beta, c, b)
        tokens = min_tokens_to_hide_allgather(unit, p, net.alpha, net.beta, c, b)
        pmax = max_devices_before_comm_bound(t, unit, net.alpha, net.beta, c, b)
        out[f"allgather_{key}"] = Worked(
            f"all-gather of one unit, {net.name}, p = {p}", "α · log2(p) + b · P_unit / β",
            f"{sci(net.alpha)} · log2({p}) + {b} · {n(unit)} / {sci(net.beta)}", ag,
            f"{ag * 1e3:.3f} ms: {'communication-bound' if bound else 'hidden behind the forward'}")
        out[f"tokens_{key}"] = Worked(
            f"tokens per device to hide the all-gather, {net.name}, p = {p}",
            "C/2 · (α · log2(p) / P_unit + b / β)",
            f"{sci(c)}/2 · ({sci(net.alpha)} · log2({p}) / {n(unit)} + {b} / {sci(net.beta)})",
            tokens, f"{tokens:,.0f} tokens per device")
        out[f"pmax_{key}"] = Worked(
            f"largest device count at T = {n(t)}, {net.name}", "2 ** ((2T/C − b/β) · P_unit / α)",
            f"2 ** ((2 · {n(t)} / {sci(c)} − {b} / {sci(net.beta)}) · {n(unit)} / {sci(net.alpha)})",
            pmax, "no limit within float range" if math.isinf(pmax) else
            ("1: the bandwidth term alone already exceeds the forward" if pmax == 1.0 else f"{pmax:.4g} devices"))
        if p > 1:       # the literature's form beside the course's (solutions only: keys "note_...")
            std = standard_allgather_seconds(unit * b, p, net.alpha, net.beta)
            out[f"note_allgather_standard_{key}"] = Worked(
                f"all-gather of one unit with the standard (p−1)/p factor, {net.name}, p = {p}",
                "α · log2(p) + (p−1)/p · b · P_unit / β",
                f"{sci(net.alpha)} · log2({p}) + {p - 1}/{p} · {b} · {n(unit)} / {sci(net.beta)}", std,
                f"{std * 1e3:.3f} ms")
        if p == 1:      # one device gathers nothing (the whole time is 0): nothing to hide, no token count
            out[f"allgather_{key}"] = Worked(
                f"all-gather of one unit, {net.name}, p = {p}", "0 for p = 1", "nothing to gather", 0.0,
                "0 ms: one device holds the whole unit, hidden behind the forward")
            out[f"tokens_{key}"] = Worked(
                f"tokens per device to hide the all-gather, {net.name}, p = {p}", "none for p = 1",
                "nothing to hide", None, "none: with nothing to gather, any number of tokens hides it")
    out.update(_rail_aligned_notes(f, unit, fwd, b))
    num_params = 2 * unit * cfg.model.num_blocks
    p = f.inter_devices
    vol = step_comm_bytes(num_params, p, b)
    out["step_bytes"] = Worked(f"bytes each rank receives per step, p = {p}", "3 · (p−1)/p · P · b",
                               f"3 · {p - 1}/{p} · {n(num_params)} · {b}", vol, f"{vol / 1e9:,.2f} GB")
    return out


def _rail_aligned_notes(f, unit: int, fwd: float, b: int) -> dict[str, Worked]:
    """(a) across nodes with the bandwidth of rail-aligned rings, the node's egress (`node_egress_beta`),
    beside the course's flat ring over per-device NICs (keys "note_rail_...", solutions only). A node is
    the intra-node network's devices; none when either network joins one device."""
    net, p, per_node = f.inter_network, f.inter_devices, f.intra_devices
    if p == 1 or per_node == 1:
        return {}
    c, t = f.device.flops_per_second, f.tokens_per_device
    beta = node_egress_beta(net.beta, per_node)
    ag = allgather_seconds(unit * b, p, net.alpha, beta)
    tokens = min_tokens_to_hide_allgather(unit, p, net.alpha, beta, c, b)
    pmax = max_devices_before_comm_bound(t, unit, net.alpha, beta, c, b)
    flat_ag = allgather_seconds(unit * b, p, net.alpha, net.beta)
    flat_pmax = max_devices_before_comm_bound(t, unit, net.alpha, net.beta, c, b)
    flips = []
    if (flat_ag >= fwd) != (ag >= fwd):
        flips.append(f"the verdict across nodes at {n(t)} tokens per device, from "
                     f"{'communication-bound' if flat_ag >= fwd else 'hidden'} to "
                     f"{'communication-bound' if ag >= fwd else 'hidden'}")
    if (flat_pmax == 1.0) != (pmax == 1.0):
        flips.append("the device count before communication binds, from "
                     + ("no device count hides it (1) to a limit" if flat_pmax == 1.0 else "a limit to 1"))
    flat_tokens = min_tokens_to_hide_allgather(unit, p, net.alpha, net.beta, c, b)
    verdict = (("; ".join(flips) if flips else "none: only the numbers change")
               + f"; the tokens needed to hide it fall from {flat_tokens:,.0f} to {tokens:,.0f}")
    return {
        "note_rail_flips": Worked("answers of (a) that flip at the node's egress", "β → devices per node · β",
                                  f"{sci(net.beta)} → {sci(beta)}", tuple(flips), verdict),
        "note_rail_beta": Worked(f"bandwidth per device of rail-aligned rings across nodes of {per_node}",
                                 "β_node = devices per node · β", f"{per_node} · {sci(net.beta)}", beta,
                                 f"{beta / 1e9:,.0f} GB/s (the node's egress)"),
        "note_rail_allgather": Worked(
            f"all-gather of one unit across nodes at the node's egress, p = {p}", "α · log2(p) + b · P_unit / β_node",
            f"{sci(net.alpha)} · log2({p}) + {b} · {n(unit)} / {sci(beta)}", ag,
            f"{ag * 1e3:.3f} ms: {'communication-bound' if ag >= fwd else 'hidden behind the forward'}"),
        "note_rail_tokens": Worked(
            f"tokens per device to hide it at the node's egress, p = {p}",
            "C/2 · (α · log2(p) / P_unit + b / β_node)",
            f"{sci(c)}/2 · ({sci(net.alpha)} · log2({p}) / {n(unit)} + {b} / {sci(beta)})",
            tokens, f"{tokens:,.0f} tokens per device"),
        "note_rail_pmax": Worked(
            f"largest device count at T = {n(t)} at the node's egress", "2 ** ((2T/C − b/β_node) · P_unit / α)",
            f"2 ** ((2 · {n(t)} / {sci(c)} − {b} / {sci(beta)}) · {n(unit)} / {sci(net.alpha)})", pmax,
            "no limit within float range" if math.isinf(pmax) else
            ("1: the bandwidth term alone already exceeds the forward" if pmax == 1.0 else f"{pmax:.4g} devices")),
    }
