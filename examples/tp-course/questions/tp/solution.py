"""Question 6 — tensor parallelism.

Megatron-style linear layers Y = X · W split over t devices, and the 2D
(FSDP x TP) forward of one FFN block on a 2 x 2 mesh. Sizes in bytes, times
in seconds, C in FLOP/s, beta in bytes/s. A collective over p devices acts on
a payload of S bytes: the whole tensor (the gathered one, or the one before
it is reduced). Ring collectives: each step costs alpha seconds plus its
bytes over beta.
"""
import math

import torch
import torch.distributed as dist


def collective_bytes(op: str, payload_bytes: float, p: int) -> float:
    """Task 6.1. Bytes one device sends in a ring collective over p devices.

    op is "all_gather", "reduce_scatter" or "all_reduce"; payload_bytes is S.
    Returns a float (bytes); 0 on a single device.
    """
    # BEGIN SOLUTION
    share = (p - 1) / p * payload_bytes
    return 2 * share if op == "all_reduce" else share
    # END SOLUTION


def collective_seconds(op: str, payload_bytes: float, p: int, alpha: float, beta: float) -> float:
    """Task 6.2. Seconds of a ring collective over p devices (alpha-beta model).

    Every step of the ring costs alpha; every byte one device sends costs
    1/beta. Returns a float (seconds); 0 on a single device.
    """
    # BEGIN SOLUTION
    steps = (p - 1) * (2 if op == "all_reduce" else 1)
    return steps * alpha + collective_bytes(op, payload_bytes, p) / beta
    # END SOLUTION


def layer_collectives(layer: str, tokens: int, d_in: int, d_out: int, bytes_per_value: int) -> dict:
    """Task 6.3. The collectives of one Megatron linear layer Y = X · W (W is d_in x d_out).

    layer is "column" (W split by columns) or "row" (W split by rows).
    Returns {"forward": [op, payload bytes] or None, "backward": [op, payload
    bytes] or None}: the collective each pass needs over the t devices, if
    any, with op named as in Task 6.1.
    """
    # BEGIN SOLUTION
    if layer == "column":
        return {"forward": None, "backward": ["all_reduce", tokens * d_in * bytes_per_value]}
    return {"forward": ["all_reduce", tokens * d_out * bytes_per_value], "backward": None}
    # END SOLUTION


def compute_bound_tokens(d_in: int, d_out: int, t: int, flops_per_second: float, alpha: float, beta: float,
                         bytes_per_value: int):
    """Task 6.4. The fewest tokens T >= 1 for which a row-parallel layer over t devices is compute bound.

    Compute bound: its forward matmul on one device takes at least as long as
    its forward collective (Tasks 6.2 and 6.3). Returns an int, or None when
    no number of tokens makes it compute bound.
    """
    # BEGIN SOLUTION
    if t == 1:
        return 1
    per_token = 2 * d_in * d_out / (t * flops_per_second) - 2 * (t - 1) * d_out * bytes_per_value / (t * beta)
    if per_token <= 0:
        return None
    return max(1, math.ceil(2 * (t - 1) * alpha / per_token))
    # END SOLUTION


# BEGIN SCAFFOLD
def _gather_columns(local: torch.Tensor, group) -> torch.Tensor:
    """All-gather column blocks over `group`: (r, c) on each rank -> (r, n c)."""
    # BEGIN SOLUTION
    n = dist.get_world_size(group)
    out = torch.empty(n * local.shape[0], local.shape[1], dtype=local.dtype)
    dist.all_gather_into_tensor(out, local.contiguous(), group=group)
    return out.reshape(n, *local.shape).permute(1, 0, 2).reshape(local.shape[0], -1)
    # END SOLUTION
# END SCAFFOLD


def ffn_forward_2d(inputs: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor, x_group, y_group) -> torch.Tensor:
    """Task 6.5. One FFN block's forward, Out = (In · W_in) · W_out, on the chip at (i, j) of an X x Y mesh.

    The chip holds In[B_X, D_Y] (`inputs`), W_in[D_X, F_Y] and W_out[F_Y, D_X]:
    row block i of X / column block j of Y as the subscripts say. x_group and
    y_group are the mesh's process groups along X and along Y (pass them as
    `group=`). Returns this chip's Out[B_X, D_Y] block, equal to the same
    block of the unsharded forward. BF16 throughout.
    """
    # BEGIN SOLUTION
    y = dist.get_world_size(y_group)
    in_full = _gather_columns(inputs, y_group)                          # In[B_X, D]      along Y
    x = dist.get_world_size(x_group)
    w_in_full = torch.empty(x * w_in.shape[0], w_in.shape[1], dtype=w_in.dtype)
    dist.all_gather_into_tensor(w_in_full, w_in.contiguous(), group=x_group)   # W_in[D, F_Y]  along X
    hidden = in_full @ w_in_full                                         # [B_X, F_Y]
    w_out_full = _gather_columns(w_out, x_group)                         # W_out[F_Y, D]   along X
    partial = hidden @ w_out_full                                        # [B_X, D], summed over Y
    rows, cols = partial.shape[0], partial.shape[1] // y
    by_rank = partial.reshape(rows, y, cols).permute(1, 0, 2).reshape(y * rows, cols)
    out = torch.empty(rows, cols, dtype=partial.dtype)
    dist.reduce_scatter_tensor(out, by_rank.contiguous(), group=y_group)  # Out[B_X, D_Y] along Y
    return out
    # END SOLUTION
