def min_batch_compute_bound(d_model, d_ff, x, y, flops_per_second, w_ici, m_x, m_y, overlap=True):
    # Mistake: the TPU Scaling Book's takeaway for mixed FSDP and TP, B/N > alpha^2 / (M_X M_Y F)
    # with alpha = C / W_ici, used for any mesh: it is derived at the book's optimal X, not at
    # the X this mesh has. Multiplied by N for the global batch, and never None.
    alpha = flops_per_second / w_ici
    return x * y * alpha ** 2 / (m_x * m_y * d_ff)
