def training_state_bytes(num_params):
    # Mistake: forgets the FP32 master weights (12 instead of 16 bytes/param)
    return 12 * num_params
