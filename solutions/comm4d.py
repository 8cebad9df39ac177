"""Question 3 — 4D communication accounting (TPU Scaling Book notation).

One FFN block's forward pass, BF16 weights and activations (2 bytes per
value), on an X x Y mesh of N = X * Y chips with the layout

    In[B_X, D_Y] · W_in[D_X, F_Y] · W_out[F_Y, D_X] -> Out[B_X, D_Y]

Conventions: batches are in tokens (batch size x sequence length). B is the
global batch; B/N is the batch per chip and B/X the batch per data (FSDP)
shard. Times in seconds, C in FLOP/s, W_ici in bytes/s (bidirectional, per
link). A matmul of (m x k) by (k x n) costs 2mkn FLOPs. A collective over an
axis that spans M mesh axes moves V bytes in V / (W_ici * M) seconds,
whatever the axis size. With overlap, communication runs while the chips
compute, so the slower of the two comms is what has to hide behind the math.
"""


def forward_flops(tokens: int, d_model: int, d_ff: int, num_blocks: int) -> int:
    """Task 3.1. FLOPs of the model's forward pass on `tokens` tokens.

    Each block multiplies (T x D) by W_in (D x F), then (T x F) by
    W_out (F x D). Returns an int (FLOPs), summed over all devices.
    """
    # BEGIN SOLUTION
    w_in = 2 * tokens * d_model * d_ff
    w_out = 2 * tokens * d_ff * d_model
    return (w_in + w_out) * num_blocks
    # END SOLUTION


def math_seconds(tokens: float, d_model: int, d_ff: int, n_devices: int,
                 flops_per_second: float) -> float:
    """Task 3.2. Seconds of math for ONE block's forward on a global batch of
    `tokens` tokens, the FLOPs split evenly over `n_devices` chips of
    `flops_per_second` each. Returns a float (seconds).
    """
    # BEGIN SOLUTION
    flops_per_chip = 4 * tokens * d_model * d_ff / n_devices     # forward_flops for one block, B real
    return flops_per_chip / flops_per_second
    # END SOLUTION


def fsdp_comm_seconds(d_model: int, d_ff: int, y: int, w_ici: float, m_x: int) -> float:
    """Task 3.3. Seconds of FSDP communication for one block's forward: the
    all-gather over X of this chip's W_in[D, F_Y] and W_out[F_Y, D] (BF16),
    over M_X mesh axes of bidirectional links of w_ici bytes/s each, for an
    FSDP axis of X >= 2 chips (X is not an argument). Returns a float (seconds).
    """
    # BEGIN SOLUTION
    bf16 = 2
    shard_values = d_model * d_ff / y              # W_in[D, F_Y] and W_out[F_Y, D] alike
    return bf16 * 2 * shard_values / (w_ici * m_x)
    # END SOLUTION


def tp_comm_seconds(tokens: float, d_model: int, x: int, w_ici: float, m_y: int) -> float:
    """Task 3.4. Seconds of tensor-parallel communication for one block's
    forward at global batch `tokens`: the all-gather over Y of In[B_X, D] and
    the reduce-scatter over Y of Out[B_X, D] (BF16), over M_Y mesh axes of
    w_ici bytes/s each, for a tensor-parallel axis of Y >= 2 chips (Y is not an
    argument). Returns a float (seconds).
    """
    # BEGIN SOLUTION
    bf16 = 2
    rows = tokens / x                              # B/X tokens on each data shard
    volume = bf16 * rows * d_model * 2             # In gathered + Out scattered
    return volume / (w_ici * m_y)
    # END SOLUTION


def min_batch_compute_bound(d_model: int, d_ff: int, x: int, y: int, flops_per_second: float,
                            w_ici: float, m_x: int, m_y: int, overlap: bool = True):
    """Task 3.5. Smallest global batch B (tokens, a real number, not per chip)
    at which one block's math takes at least as long as its communication.

    overlap=True (the default, the handout's assumption): comm is
    max(FSDP, TP). overlap=False: comm is FSDP + TP. An axis of one chip
    (x == 1 or y == 1) has no collective: its communication costs nothing.
    Returns a float, or None when no batch is large enough.
    """
    # BEGIN SOLUTION
    # Every term is linear in B: time(B) = slope * B + constant; an axis of one
    # chip moves nothing, so its term is 0 (as an all-gather over p = 1 in question 2).
    math_slope = math_seconds(1.0, d_model, d_ff, x * y, flops_per_second)
    tp_slope = 0.0 if y == 1 else tp_comm_seconds(1.0, d_model, x, w_ici, m_y)
    fsdp_const = 0.0 if x == 1 else fsdp_comm_seconds(d_model, d_ff, y, w_ici, m_x)
    # math >= tp for every B exactly when the slopes allow it.  Compare them
    # without rounding: F W M_Y >= Y C  <=>  math_slope >= tp_slope.
    tp_hides = y == 1 or d_ff * w_ici * m_y >= y * flops_per_second
    if overlap or x == 1 or y == 1:
        # with one term at 0 the sum is the max; the constant FSDP term fixes B
        if not tp_hides:
            return None
        return fsdp_const / math_slope
    # math_slope * B >= tp_slope * B + fsdp_const needs math_slope > tp_slope
    if d_ff * w_ici * m_y <= y * flops_per_second:
        return None
    return fsdp_const / (math_slope - tp_slope)
    # END SOLUTION


def block_collective_bytes(tokens: int, d_model: int, d_ff: int, x: int, y: int,
                           bytes_per_value: int = 2) -> dict:
    """Task 3.6. Bytes V of each collective of one block's forward, per chip.

    Keys: 'allgather_in', 'allgather_w_in', 'allgather_w_out',
    'reducescatter_out'. V is the byte size of the gathered tensor for an
    all-gather and of the tensor before scattering for a reduce-scatter.
    tokens is the global batch B (divisible by x); d_ff is divisible by y.
    Returns a dict of ints (bytes).
    """
    # BEGIN SOLUTION
    local_tokens = tokens // x
    ff_shard = d_ff // y
    activations = local_tokens * d_model * bytes_per_value     # [B_X, D]
    weight = d_model * ff_shard * bytes_per_value              # [D, F_Y] or [F_Y, D]
    return {"allgather_in": activations, "allgather_w_in": weight,
            "allgather_w_out": weight, "reducescatter_out": activations}
    # END SOLUTION
