# Generated from solutions/ by `shardlab stubs`: fill in every function that
# raises NotImplementedError. Keep the names and signatures.
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
    raise NotImplementedError("Task 1.1: param_count")


def training_state_bytes(num_params: int) -> int:
    """Task 1.2. Bytes of the training state for num_params parameters.

    FP32 master weights, FP32 accumulated gradients and both FP32 AdamW
    moments. Returns an int (bytes).
    """
    raise NotImplementedError("Task 1.2: training_state_bytes")


def activation_bytes(d_model: int, d_ff: int, num_blocks: int, tokens: int) -> int:
    """Task 1.3. Bytes of activations saved for the backward pass.

    Autograd keeps the input of each linear layer, in BF16: a (tokens x
    d_model) input of W_in and a (tokens x d_ff) input of W_out per block. A
    block's output is the next block's input and is counted once.
    tokens = batch size x sequence length. Returns an int (bytes).
    """
    raise NotImplementedError("Task 1.3: activation_bytes")


def devices_needed(total_bytes: int, device_bytes: int) -> int:
    """Task 1.4. How many devices of device_bytes each hold total_bytes.

    The fewest whole devices whose capacities add up to at least
    total_bytes, computed exactly (no floating-point rounding); 0 bytes
    need 0 devices. Returns an int.
    """
    raise NotImplementedError("Task 1.4: devices_needed")


def fsdp_bytes_per_device(state_bytes: float, activation_bytes: float, n_fsdp: int) -> float:
    """Task 1.5. Bytes per device when training state and half the activations
    are sharded over n_fsdp devices.

    The training state is sharded; every second layer's activations are
    sharded, the other half are replicated on every device.
    activation_bytes is for the tokens one device processes. Returns a
    float (bytes).
    """
    raise NotImplementedError("Task 1.5: fsdp_bytes_per_device")


def min_fsdp_degree(state_bytes: int, activation_bytes: int, device_bytes: int):
    """Task 1.6. Smallest FSDP degree n >= 1 with
    fsdp_bytes_per_device(state_bytes, activation_bytes, n) < device_bytes
    (strictly less), or None when no degree fits, however large.
    Returns an int or None. Solve it in closed form: a search over n does
    not finish in time for the largest inputs.
    """
    raise NotImplementedError("Task 1.6: min_fsdp_degree")


def zero_bytes_per_device(num_params: int, stage: int, n_dp: int) -> float:
    """Task 1.7. Bytes per device for mixed-precision AdamW under ZeRO.

    BF16 weights (2 bytes/param), BF16 gradients (2) and K = 12 bytes/param of
    optimizer state (FP32 master weights and two moments). Stage 0 shards
    nothing; stage 1 shards the optimizer state over n_dp devices; stage 2
    also the gradients; stage 3 also the weights. Returns a float (bytes).
    """
    raise NotImplementedError("Task 1.7: zero_bytes_per_device")
