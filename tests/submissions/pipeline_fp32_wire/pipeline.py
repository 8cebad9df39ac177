def p2p_bytes_per_step(d_model, tokens_per_microbatch, m, bytes_per_value=4):
    # Mistake: FP32 (4-byte) activations and gradients on the wire by default; they are BF16
    return 2 * m * tokens_per_microbatch * d_model * bytes_per_value
