"""Question 3's real run: one block's forward with exactly the layout

    In[B_X, D_Y] · W_in[D_X, F_Y] · W_out[F_Y, D_X] -> Out[B_X, D_Y]

on an X x Y DeviceMesh of gloo ranks (CPU, BF16). The chip at mesh
coordinate (i, j) holds row block i / column block j of each tensor as the
subscripts say. Values are small integers, so every BF16 sum is exact and the
sharded output must equal the unsharded forward bit for bit.

Collectives, in this order (the names are block_collective_bytes' keys):
all-gather In over Y, all-gather W_in and W_out over X, reduce-scatter Out
over Y. torch gathers and scatters along dim 0, so blocks along another dim
are moved there first (shapes in the comments are per chip).
"""
from __future__ import annotations

import warnings

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

COLLECTIVES = ("allgather_in", "allgather_w_in", "allgather_w_out", "reducescatter_out")
AXIS = {"allgather_in": "y", "allgather_w_in": "x", "allgather_w_out": "x", "reducescatter_out": "y"}


def block_tensors(tokens: int, d_model: int, d_ff: int, seed: int):
    """In (B, D), W_in (D, F), W_out (F, D): BF16 values in {-1, 0, 1}."""
    g = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randint(-1, 2, shape, generator=g).to(torch.bfloat16)  # noqa: E731
    return make(tokens, d_model), make(d_model, d_ff), make(d_ff, d_model)


def block(t: torch.Tensor, i: int, n_i: int, j: int, n_j: int) -> torch.Tensor:
    """Row block i of n_i, column block j of n_j."""
    rows, cols = t.shape[0] // n_i, t.shape[1] // n_j
    return t[i * rows:(i + 1) * rows, j * cols:(j + 1) * cols].contiguous()


def _gather_cols(local: torch.Tensor, group, n: int) -> torch.Tensor:
    """All-gather column blocks: (r, c) per rank -> (r, n * c)."""
    out = torch.empty(n * local.shape[0], local.shape[1], dtype=local.dtype)
    dist.all_gather_into_tensor(out, local, group=group)          # (n r, c), rank-major
    return out.reshape(n, *local.shape).permute(1, 0, 2).reshape(local.shape[0], -1)


def sharded_forward(in_s, w_in_s, w_out_s, x: int, y: int, gx, gy) -> torch.Tensor:
    """One block on chip (i, j); returns its Out[B_X, D_Y] block."""
    in_full = _gather_cols(in_s, gy, y)                             # In[B_X, D]      over Y
    w_in = torch.empty(x * w_in_s.shape[0], w_in_s.shape[1], dtype=w_in_s.dtype)
    dist.all_gather_into_tensor(w_in, w_in_s, group=gx)             # W_in[D, F_Y]    over X
    w_out = _gather_cols(w_out_s, gx, x)                            # W_out[F_Y, D]   over X
    partial = (in_full @ w_in) @ w_out                              # (B/X, D), summed over Y
    rows, cols = partial.shape[0], partial.shape[1] // y
    by_rank = partial.reshape(rows, y, cols).permute(1, 0, 2).reshape(y * rows, cols)
    out = torch.empty(rows, cols, dtype=partial.dtype)
    dist.reduce_scatter_tensor(out, by_rank, group=gy)              # Out[B_X, D_Y]   over Y
    return out


def run_on_mesh(tokens: int, d_model: int, d_ff: int, x: int, y: int, seed: int, tracer) -> dict:
    """Every rank of an X*Y gloo group: the traced forward and its check.
    `tracer` is the harness's collective tracer (a `tracing.Tracer`)."""
    mesh = init_device_mesh("cpu", (x, y), mesh_dim_names=("x", "y"))
    gx, gy = mesh.get_group("x"), mesh.get_group("y")
    coordinate = mesh.get_coordinate()
    assert coordinate is not None                   # None only for a rank outside the mesh: every rank is in it
    i, j = coordinate
    inputs, w_in, w_out = block_tensors(tokens, d_model, d_ff, seed)
    tracer.set_phase("block forward")
    with warnings.catch_warnings():
        # torch 2.13 calls *_tensor collectives deprecated (for *_single); the
        # tracer wraps these names, and the warnings would flood the output
        warnings.simplefilter("ignore", FutureWarning)
        out = sharded_forward(block(inputs, i, x, j, y), block(w_in, i, x, j, y),
                              block(w_out, j, y, i, x), x, y, gx, gy)
    events = tracer.collectives("block forward")
    labels = {"x": tracer._group_label(gx), "y": tracer._group_label(gy)}
    return {
        "measured": {name: e["bytes"] for name, e in zip(COLLECTIVES, events)},
        "axes_ok": len(events) == len(COLLECTIVES)
        and all(e["group"] == labels[AXIS[name]] for name, e in zip(COLLECTIVES, events)),
        "output_ok": bool(torch.equal(out, block((inputs @ w_in) @ w_out, i, x, j, y))),
    }
