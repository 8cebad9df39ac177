def activation_bytes(d_model, d_ff, num_blocks, tokens):
    # Mistake: saves each block's output too, though it is the next block's input (counted twice)
    per_block = tokens * d_model + tokens * d_ff + tokens * d_model
    return per_block * num_blocks * 2
