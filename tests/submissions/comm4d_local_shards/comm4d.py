def block_collective_bytes(tokens, d_model, d_ff, x, y, bytes_per_value=2):
    # Mistake: the size of the local shard each chip sends, not the gathered
    # tensor (all-gather) or the tensor before scattering (reduce-scatter)
    b_x, f_y = tokens // x, d_ff // y
    return {"allgather_in": b_x * (d_model // y) * bytes_per_value,
            "allgather_w_in": (d_model // x) * f_y * bytes_per_value,
            "allgather_w_out": f_y * (d_model // x) * bytes_per_value,
            "reducescatter_out": b_x * (d_model // y) * bytes_per_value}
