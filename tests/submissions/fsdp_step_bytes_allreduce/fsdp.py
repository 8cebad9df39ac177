def step_comm_bytes(num_params, p, bytes_per_param=2):
    # Mistake: counts an all-reduce of the gradients, 2 (p-1)/p, where FSDP reduce-scatters them
    one_collective = (p - 1) / p * num_params * bytes_per_param
    return 2 * one_collective + 2 * one_collective
