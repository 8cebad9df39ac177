def min_batch_compute_bound(d_model, d_ff, x, y, flops_per_second, w_ici, m_x, m_y, overlap=True):
    # Mistakes: sums the comms although the default assumes overlap (max), and
    # answers with the batch per chip B/N instead of the global batch B.
    n = x * y
    math_per_token = 4 * d_model * d_ff / (n * flops_per_second)
    tp_per_token = 0 if y == 1 else 4 * d_model / (x * w_ici * m_y)     # an axis of one chip moves nothing
    fsdp = 0 if x == 1 else 4 * d_model * d_ff / (y * w_ici * m_x)
    if math_per_token <= tp_per_token:
        return None
    return fsdp / (math_per_token - tp_per_token) / n
