import math


def fsdp_bytes_per_device(state_bytes, activation_bytes, n_fsdp):
    # Mistake: shards all activations, not every second layer's
    return (state_bytes + activation_bytes) / n_fsdp


def min_fsdp_degree(state_bytes, activation_bytes, device_bytes):
    return math.floor((state_bytes + activation_bytes) / device_bytes) + 1
