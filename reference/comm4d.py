"""Question 3 — 4D communication accounting, as an answer key.

TPU Scaling Book notation (docs/spec.md, question 3): one FFN block's forward pass,
BF16 weights and activations, laid out In[B_X, D_Y] · W_in[D_X, F_Y] ·
W_out[F_Y, D_X] -> Out[B_X, D_Y] on an X x Y mesh of N = X * Y chips.

Conventions: B is the *global* batch in tokens; B/N is the batch per chip,
B/X the batch per data (FSDP) shard. Seconds, FLOP/s, bytes/s. A collective
over an axis of two or more chips spanning M mesh axes of bidirectional links
moves V bytes in V / (W_ici * M) seconds, whatever the axis size beyond one;
over an axis of one chip (X = 1 or Y = 1) nothing moves and it costs nothing,
as an all-gather over p = 1 device does in question 2 (docs/spec.md). With
overlap (the default) communication hides behind compute, so a block is
compute bound when math >= max(FSDP, TP); without it, math >= FSDP + TP; with
one of the two at 0 (an axis of one chip) both conventions agree.

Solving for B (D cancels; F, C, W = W_ici):
  math >= FSDP  <=>  B >= X C / (W M_X)             (FSDP comms do not grow with B; 0 at X = 1)
  math >= TP    <=>  F W M_Y >= Y C                 (both grow with B: no B helps; always at Y = 1)
  math >= FSDP + TP  <=>  B (F W M_Y - Y C) >= X C F M_Y / M_X   (X, Y >= 2)
"""
from __future__ import annotations

import math

from shardlab.reference.derivation import Worked, n, sci
from shardlab.reference.specs import BF16_BYTES


def forward_flops(tokens: int, d_model: int, d_ff: int, num_blocks: int) -> int:
    """Two matmuls per block, 2 * T * D * F FLOPs each: 4 T D F L."""
    return 4 * tokens * d_model * d_ff * num_blocks


def math_seconds(tokens: float, d_model: int, d_ff: int, n_devices: int, flops_per_second: float) -> float:
    """One block's forward FLOPs split over all N chips: 4 B D F / (N C)."""
    return 4 * tokens * d_model * d_ff / (n_devices * flops_per_second)


def fsdp_comm_seconds(d_model: int, d_ff: int, y: int, w_ici: float, m_x: int) -> float:
    """All-gather over X of W_in[D, F_Y] and W_out[F_Y, D] (2 D F/Y values,
    2 bytes each): 4 D F / (Y W M_X). X is no argument: this is the time of the
    gather over an axis of X >= 2 chips; at X = 1 there is none (`block_seconds`)."""
    return 4 * d_model * d_ff / (y * w_ici * m_x)


def tp_comm_seconds(tokens: float, d_model: int, x: int, w_ici: float, m_y: int) -> float:
    """All-gather over Y of In[B_X, D] plus reduce-scatter over Y of Out[B_X, D]
    (2 B D/X values, 2 bytes each): 4 B D / (X W M_Y). Y is no argument: this is the
    time over an axis of Y >= 2 chips; at Y = 1 there are none (`block_seconds`)."""
    return 4 * tokens * d_model / (x * w_ici * m_y)


def tp_hideable(d_ff: int, y: int, flops_per_second: float, w_ici: float, m_y: int) -> bool:
    """math >= TP at every B > 0: 4BDF/(XYC) >= 4BD/(XWM_Y) <=> F W M_Y >= Y C."""
    return d_ff * w_ici * m_y >= y * flops_per_second


def min_batch_compute_bound(d_model: int, d_ff: int, x: int, y: int, flops_per_second: float,
                            w_ici: float, m_x: int, m_y: int, overlap: bool = True) -> float | None:
    """Smallest global batch B (tokens, real) with math >= comm, or None.

    overlap: comm = max(FSDP, TP), so B = X C / (W M_X) when the TP term hides
    (F W M_Y >= Y C), else None. Summed: comm = FSDP + TP, so
    B = X C F M_Y / (M_X (F W M_Y - Y C)) when F W M_Y > Y C, else None.
    An axis of one chip has no collective (docs/spec.md, question 3): at Y = 1
    the TP term is 0 and always hides; at X = 1 the FSDP term is 0, so B = 0.0
    (every batch) when the TP term hides. With a term at 0, max and sum agree.
    d_model cancels: every term is proportional to D."""
    c, w = flops_per_second, w_ici
    hides = y == 1 or tp_hideable(d_ff, y, c, w, m_y)
    if overlap or x == 1 or y == 1:
        fsdp_batch = 0.0 if x == 1 else x * c / (w * m_x)
        return fsdp_batch if hides else None
    room = d_ff * w * m_y - y * c
    return x * c * d_ff * m_y / (m_x * room) if room > 0 else None


def block_collective_bytes(tokens: int, d_model: int, d_ff: int, x: int, y: int,
                           bytes_per_value: int = BF16_BYTES) -> dict[str, int]:
    """Volume V of each collective of one block's forward on one chip: the
    gathered tensor (all-gather) or the tensor before scattering
    (reduce-scatter). Needs tokens % x == 0 and d_ff % y == 0."""
    if tokens % x or d_ff % y:
        raise ValueError(f"tokens ({tokens}) must divide by x ({x}) and d_ff ({d_ff}) by y ({y})")
    b_x, f_y = tokens // x, d_ff // y
    return {
        "allgather_in": b_x * d_model * bytes_per_value,        # In[B_X, D_Y] -> [B_X, D] over Y
        "allgather_w_in": d_model * f_y * bytes_per_value,      # W_in[D_X, F_Y] -> [D, F_Y] over X
        "allgather_w_out": f_y * d_model * bytes_per_value,     # W_out[F_Y, D_X] -> [F_Y, D] over X
        "reducescatter_out": b_x * d_model * bytes_per_value,   # partial Out[B_X, D] -> [B_X, D_Y] over Y
    }


def optimal_fsdp_degree(tokens: float, n_devices: int, d_ff: int, m_x: int, m_y: int) -> float:
    """The Scaling Book's X_opt = sqrt(B N M_X / (F M_Y)): with Y = N / X, the
    summed comm 4DFX/(N W M_X) + 4BD/(X W M_Y) is smallest at this X."""
    return math.sqrt(tokens * n_devices * m_x / (d_ff * m_y))


def scaling_book_takeaway_per_chip(d_ff: int, flops_per_second: float, w_ici: float, m_x: int,
                                   m_y: int) -> float:
    """The Scaling Book's takeaway for mixed FSDP and TP, B/N > alpha^2 / (M_X M_Y F) with
    alpha = C / W_ici, as a batch per chip. It holds at X = X_opt (`optimal_fsdp_degree`),
    where the FSDP and TP comms are equal: math >= each of them there gives
    4BDF/(NC) >= 4D/W sqrt(BF/(N M_X M_Y)), i.e. B/N >= alpha^2/(M_X M_Y F). Not graded:
    at a given X (the course's) the answer is `min_batch_compute_bound`; a student who
    uses the takeaway there commits 3.5's "Scaling Book shortcut"."""
    alpha = flops_per_second / w_ici
    return alpha ** 2 / (m_x * m_y * d_ff)


def block_seconds(tokens: float, d_model: int, d_ff: int, mesh) -> dict[str, float]:
    """math, FSDP and TP seconds of one block's forward at global batch `tokens`; a
    collective over an axis of one chip costs nothing (X = 1: no FSDP, Y = 1: no TP)."""
    c, w = mesh.device.flops_per_second, mesh.device.ici_bytes_per_second
    return {"math": math_seconds(tokens, d_model, d_ff, mesh.n, c),
            "fsdp": 0.0 if mesh.x == 1 else fsdp_comm_seconds(d_model, d_ff, mesh.y, w, mesh.m_x),
            "tp": 0.0 if mesh.y == 1 else tp_comm_seconds(tokens, d_model, mesh.x, w, mesh.m_y)}


# ---- the handout's answers ---------------------------------------------------

def _tokens(b: float) -> str:
    return f"{b:,.1f} tokens"


def _thresholds(d: int, f: int, mesh, overlap: bool) -> dict[str, Worked]:
    """B, B/N and B/X at the compute-bound threshold in one convention."""
    x, y, mx, my, nn = mesh.x, mesh.y, mesh.m_x, mesh.m_y, mesh.n
    c, w = mesh.device.flops_per_second, mesh.device.ici_bytes_per_second
    b = min_batch_compute_bound(d, f, x, y, c, w, mx, my, overlap)
    tag = "overlapped, max(FSDP, TP)" if overlap else "summed, FSDP + TP"
    if x == 1 and b is not None:     # no FSDP collective over one chip, and the TP comms hide
        formula, subst = "0 (X = 1: no FSDP collective, and T_math ≥ T_TP at every B)", "X = 1"
    elif overlap or y == 1:         # at Y = 1 the TP term is 0: the sum is the max
        formula, subst = "X·C / (W_ici·M_X)", f"{x} · {sci(c)} / ({sci(w)} · {mx})"
    else:
        formula = "X·C·F·M_Y / (M_X·(F·W_ici·M_Y − Y·C))"
        subst = f"{x} · {sci(c)} · {n(f)} · {my} / ({mx} · ({n(f)} · {sci(w)} · {my} − {y} · {sci(c)}))"
    if b == 0:
        return {k: Worked(f"{q} ({tag})", formula, subst, 0.0, "0 tokens: every batch is compute bound")
                for k, q in (("batch", "global batch B"), ("per_chip", "batch per chip B/N"),
                             ("per_shard", "batch per data shard B/X"))}
    if b is None:
        why = ("no batch is large enough: the TP comms grow with B as fast as the math "
               "and are never hidden (F·W_ici·M_Y " + ("<" if overlap else "≤") + " Y·C)")
        return {k: Worked(f"{q} ({tag})", formula, subst, None, why)
                for k, q in (("batch", "global batch B"), ("per_chip", "batch per chip B/N"),
                             ("per_shard", "batch per data shard B/X"))}
    return {
        "batch": Worked(f"global batch B ({tag})", f"B = {formula}", subst, b, _tokens(b)),
        "per_chip": Worked(f"batch per chip B/N ({tag})", "B / (X·Y)", f"{b:,.2f} / {nn}",
                           b / nn, _tokens(b / nn) + " per chip"),
        "per_shard": Worked(f"batch per data shard B/X ({tag})", "B / X", f"{b:,.2f} / {x}",
                            b / x, _tokens(b / x) + " per data shard"),
    }


def worked(cfg) -> dict[str, Worked]:
    """The answers for the course mesh, in both conventions, with derivations."""
    m, mesh = cfg.model, cfg.comm4d
    d, f, x, y, mx, my, nn = m.d_model, m.d_ff, mesh.x, mesh.y, mesh.m_x, mesh.m_y, mesh.n
    c, w = mesh.device.flops_per_second, mesh.device.ici_bytes_per_second
    per_token = block_seconds(1, d, f, mesh)
    hidden = y == 1 or tp_hideable(f, y, c, w, my)
    out = {
        "math": Worked("math time of one block", "T_math = 4·B·D·F / (N·C)",
                       f"4 · B · {n(d)} · {n(f)} / ({nn} · {sci(c)})", per_token["math"],
                       f"B × {sci(per_token['math'])} s"),
        "fsdp": Worked("FSDP comms of one block (all-gather W_in and W_out over X)",
                       "T_FSDP = 4·D·F / (Y·W_ici·M_X)",
                       f"4 · {n(d)} · {n(f)} / ({y} · {sci(w)} · {mx})", per_token["fsdp"],
                       f"{sci(per_token['fsdp'])} s"),
        "tp": Worked("TP comms of one block (all-gather In, reduce-scatter Out over Y)",
                     "T_TP = 4·B·D / (X·W_ici·M_Y)", f"4 · B · {n(d)} / ({x} · {sci(w)} · {my})",
                     per_token["tp"], f"B × {sci(per_token['tp'])} s"),
        "tp_hidden": Worked("can the TP comms hide behind the math?",
                            "T_math ≥ T_TP for all B ⇔ F ≥ Y·C / (W_ici·M_Y)",
                            f"{n(f)} ≥ {y} · {sci(c)} / ({sci(w)} · {my}) = {y * c / (w * my):,.1f}",
                            hidden, "yes, at every batch" if hidden else "no, at no batch"),
    }
    out.update(_one_chip_axes(mesh, per_token))
    for conv, overlap in (("overlap", True), ("summed", False)):
        out.update({f"{conv}_{k}": v for k, v in _thresholds(d, f, mesh, overlap).items()})
    b = out[("overlap" if mesh.overlap else "summed") + "_batch"].value
    if not b:       # no batch, or every batch (X = 1): no threshold to work at
        return out
    t = block_seconds(b, d, f, mesh)
    out["times"] = Worked("one block's forward at the threshold B", "T_math, T_FSDP, T_TP",
                          f"B = {b:,.2f}", t,
                          f"math {sci(t['math'])} s, FSDP {sci(t['fsdp'])} s, TP {sci(t['tp'])} s")
    per_chip = math.ceil(b / nn)
    whole = per_chip * nn
    out["whole"] = Worked("smallest whole number of tokens per chip", "⌈B / N⌉, then B = N·⌈B / N⌉",
                          f"⌈{b:,.2f} / {nn}⌉ = {per_chip}", whole,
                          f"{per_chip} tokens per chip, B = {whole:,} tokens")
    if f % y == 0:
        v = block_collective_bytes(whole, d, f, x, y)
        out["volumes"] = Worked("collective volumes per chip at the batch of (b), in whole tokens per chip",
                                "2·(B/X)·D (In, Out), 2·D·(F/Y) (W_in, W_out)",
                                f"B = {whole:,}: 2 · {whole // x:,} · {n(d)}, 2 · {n(d)} · {n(f // y)}", v,
                                ", ".join(f"{k} {val:,} bytes" for k, val in v.items()))
    if x == 1 or y == 1:    # X_opt and the book's takeaway mix FSDP with TP: neither applies
        return out
    x_opt = optimal_fsdp_degree(b, nn, f, mx, my)
    out["x_opt"] = Worked("the Scaling Book's optimal FSDP degree at this B",
                          "X_opt = sqrt(B·N·M_X / (F·M_Y))",
                          f"sqrt({b:,.2f} · {nn} · {mx} / ({n(f)} · {my}))", x_opt,
                          f"X_opt ≈ {x_opt:.2f} (the mesh uses X = {x})")
    shortcut = scaling_book_takeaway_per_chip(f, c, w, mx, my)
    out["note_shortcut_per_chip"] = Worked(
        "the Scaling Book's takeaway B/N > α²/(M_X·M_Y·F), α = C/W_ici, as a batch per chip "
        "(valid at X = X_opt only)",
        "(C / W_ici)**2 / (M_X·M_Y·F)",
        f"({sci(c)} / {sci(w)})^2 / ({mx} · {my} · {n(f)})", shortcut,
        f"{shortcut:,.1f} tokens per chip, B = {shortcut * nn:,.1f} tokens")
    feb = 4 * shortcut
    out["note_shortcut_feb_2025_per_chip"] = Worked(
        "the Feb-2025 edition's criterion B/N > 4α²/(M_X·M_Y·F), FSDP and TP comms summed (valid at "
        "X = X_opt only)", "4·(C / W_ici)**2 / (M_X·M_Y·F)",
        f"4 · ({sci(c)} / {sci(w)})^2 / ({mx} · {my} · {n(f)})", feb,
        f"{feb:,.1f} tokens per chip, B = {feb * nn:,.1f} tokens")
    return out


def _one_chip_axes(mesh, per_token: dict[str, float]) -> dict[str, Worked]:
    """(a)'s comms on a mesh with an axis of one chip: that axis moves nothing (as p = 1 in question 2)."""
    out = {}
    if mesh.x == 1:
        out["fsdp"] = Worked("FSDP comms of one block (all-gather W_in and W_out over X)", "0 for X = 1",
                             "an axis of one chip: nothing to gather", 0.0, "0 s: X = 1 moves nothing")
    if mesh.y == 1:
        out["tp"] = Worked("TP comms of one block (all-gather In, reduce-scatter Out over Y)", "0 for Y = 1",
                           "an axis of one chip: nothing to gather or scatter", per_token["tp"],
                           "0 s at every B: Y = 1 moves nothing")
        out["tp_hidden"] = Worked("can the TP comms hide behind the math?", "T_TP = 0 for Y = 1",
                                  "no TP collective", True, "yes, at every batch: there is nothing to hide")
    return out
