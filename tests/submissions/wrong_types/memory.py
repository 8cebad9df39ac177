import math


def devices_needed(total_bytes, device_bytes):
    return float(math.ceil(total_bytes / device_bytes))  # a float, not an int


def fsdp_bytes_per_device(state_bytes, activation_bytes, n_fsdp):
    return float("nan")


def param_count(d_model, d_ff, num_blocks):
    return str(2 * d_model * d_ff * num_blocks)
