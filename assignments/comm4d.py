# Generated from solutions/ by `shardlab stubs`: fill in every function that
# raises NotImplementedError. Keep the names and signatures.
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
    raise NotImplementedError("Task 3.1: forward_flops")


def math_seconds(tokens: float, d_model: int, d_ff: int, n_devices: int,
                 flops_per_second: float) -> float:
    """Task 3.2. Seconds of math for ONE block's forward on a global batch of
    `tokens` tokens, the FLOPs split evenly over `n_devices` chips of
    `flops_per_second` each. Returns a float (seconds).
    """
    raise NotImplementedError("Task 3.2: math_seconds")


def fsdp_comm_seconds(d_model: int, d_ff: int, y: int, w_ici: float, m_x: int) -> float:
    """Task 3.3. Seconds of FSDP communication for one block's forward: the
    all-gather over X of this chip's W_in[D, F_Y] and W_out[F_Y, D] (BF16),
    over M_X mesh axes of bidirectional links of w_ici bytes/s each, for an
    FSDP axis of X >= 2 chips (X is not an argument). Returns a float (seconds).
    """
    raise NotImplementedError("Task 3.3: fsdp_comm_seconds")


def tp_comm_seconds(tokens: float, d_model: int, x: int, w_ici: float, m_y: int) -> float:
    """Task 3.4. Seconds of tensor-parallel communication for one block's
    forward at global batch `tokens`: the all-gather over Y of In[B_X, D] and
    the reduce-scatter over Y of Out[B_X, D] (BF16), over M_Y mesh axes of
    w_ici bytes/s each, for a tensor-parallel axis of Y >= 2 chips (Y is not an
    argument). Returns a float (seconds).
    """
    raise NotImplementedError("Task 3.4: tp_comm_seconds")


def min_batch_compute_bound(d_model: int, d_ff: int, x: int, y: int, flops_per_second: float,
                            w_ici: float, m_x: int, m_y: int, overlap: bool = True):
    """Task 3.5. Smallest global batch B (tokens, a real number, not per chip)
    at which one block's math takes at least as long as its communication.

    overlap=True (the default, the handout's assumption): comm is
    max(FSDP, TP). overlap=False: comm is FSDP + TP. An axis of one chip
    (x == 1 or y == 1) has no collective: its communication costs nothing.
    Returns a float, or None when no batch is large enough.
    """
    raise NotImplementedError("Task 3.5: min_batch_compute_bound")


def block_collective_bytes(tokens: int, d_model: int, d_ff: int, x: int, y: int,
                           bytes_per_value: int = 2) -> dict:
    """Task 3.6. Bytes V of each collective of one block's forward, per chip.

    Keys: 'allgather_in', 'allgather_w_in', 'allgather_w_out',
    'reducescatter_out'. V is the byte size of the gathered tensor for an
    all-gather and of the tensor before scattering for a reduce-scatter.
    tokens is the global batch B (divisible by x); d_ff is divisible by y.
    Returns a dict of ints (bytes).
    """
    raise NotImplementedError("Task 3.6: block_collective_bytes")
