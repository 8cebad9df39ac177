"""Question 1 — memory accounting.

Conventions: sizes in bytes; GB = 10**9 bytes (a device sold as "80 GB" holds
80e9 bytes); FP32 = 4 bytes, BF16 = 2 bytes. The model is FFN-only: num_blocks
blocks, each W_in (d_model x d_ff) then W_out (d_ff x d_model), no biases.
Training state is FP32 master weights, FP32 accumulated gradients and two
FP32 AdamW moments. Activations are BF16, no activation checkpointing.
"""


def param_count(d_model: int, d_ff: int, num_blocks: int) -> int:
    """Task 1.1. Number of parameters of the model.

    Each block holds W_in (d_model x d_ff) and W_out (d_ff x d_model).
    Returns an int.
    """
    # BEGIN SOLUTION
    per_block = d_model * d_ff + d_ff * d_model
    return per_block * num_blocks
    # END SOLUTION


def training_state_bytes(num_params: int) -> int:
    """Task 1.2. Bytes of the training state for num_params parameters.

    FP32 master weights, FP32 accumulated gradients and both FP32 AdamW
    moments. Returns an int (bytes).
    """
    # BEGIN SOLUTION
    fp32 = 4
    weights, grads, adam_m, adam_v = fp32, fp32, fp32, fp32
    return (weights + grads + adam_m + adam_v) * num_params
    # END SOLUTION


def activation_bytes(d_model: int, d_ff: int, num_blocks: int, tokens: int) -> int:
    """Task 1.3. Bytes of activations saved for the backward pass.

    Autograd keeps the input of each linear layer, in BF16: a (tokens x
    d_model) input of W_in and a (tokens x d_ff) input of W_out per block. A
    block's output is the next block's input and is counted once.
    tokens = batch size x sequence length. Returns an int (bytes).
    """
    # BEGIN SOLUTION
    bf16 = 2
    per_block = tokens * d_model * bf16 + tokens * d_ff * bf16
    return per_block * num_blocks
    # END SOLUTION


def devices_needed(total_bytes: int, device_bytes: int) -> int:
    """Task 1.4. How many devices of device_bytes each hold total_bytes.

    The fewest whole devices whose capacities add up to at least
    total_bytes, computed exactly (no floating-point rounding); 0 bytes
    need 0 devices. Returns an int.
    """
    # BEGIN SOLUTION
    whole, rest = divmod(total_bytes, device_bytes)
    return int(whole) + (1 if rest > 0 else 0)
    # END SOLUTION


def fsdp_bytes_per_device(state_bytes: float, activation_bytes: float, n_fsdp: int) -> float:
    """Task 1.5. Bytes per device when training state and half the activations
    are sharded over n_fsdp devices.

    The training state is sharded; every second layer's activations are
    sharded, the other half are replicated on every device.
    activation_bytes is for the tokens one device processes. Returns a
    float (bytes).
    """
    # BEGIN SOLUTION
    # (state + act/2) / n + act/2
    sharded = state_bytes + activation_bytes / 2
    replicated = activation_bytes / 2
    return sharded / n_fsdp + replicated
    # END SOLUTION


def min_fsdp_degree(state_bytes: int, activation_bytes: int, device_bytes: int):
    """Task 1.6. Smallest FSDP degree n >= 1 with
    fsdp_bytes_per_device(state_bytes, activation_bytes, n) < device_bytes
    (strictly less), or None when no degree fits, however large.
    Returns an int or None. Solve it in closed form: a search over n does
    not finish in time for the largest inputs.
    """
    # BEGIN SOLUTION
    # Work in half-bytes so every quantity is an integer: no float ties.
    sharded2 = 2 * state_bytes + activation_bytes     # 2 * (state + act/2)
    room2 = 2 * device_bytes - activation_bytes       # 2 * (device - act/2)
    if room2 <= 0:
        return None
    # need sharded2 / n < room2, i.e. n > sharded2 / room2
    return int(sharded2 // room2) + 1
    # END SOLUTION


def zero_bytes_per_device(num_params: int, stage: int, n_dp: int) -> float:
    """Task 1.7. Bytes per device for mixed-precision AdamW under ZeRO.

    BF16 weights (2 bytes/param), BF16 gradients (2) and K = 12 bytes/param of
    optimizer state (FP32 master weights and two moments). Stage 0 shards
    nothing; stage 1 shards the optimizer state over n_dp devices; stage 2
    also the gradients; stage 3 also the weights. Returns a float (bytes).
    """
    # BEGIN SOLUTION
    weights, grads, optimizer = 2 * num_params, 2 * num_params, 12 * num_params
    sharded_from_stage = {0: (), 1: ("optimizer",), 2: ("optimizer", "grads"),
                          3: ("optimizer", "grads", "weights")}[stage]
    total = 0.0
    for name, nbytes in (("weights", weights), ("grads", grads), ("optimizer", optimizer)):
        total += nbytes / n_dp if name in sharded_from_stage else nbytes
    return total
    # END SOLUTION
