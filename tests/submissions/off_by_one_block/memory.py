def activation_bytes(d_model, d_ff, num_blocks, tokens):
    # Mistake: counts one block too few ("the last block's inputs are not needed")
    return (num_blocks - 1) * tokens * (d_model + d_ff) * 2
