def fsdp_comm_seconds(d_model, d_ff, y, w_ici, m_x):
    # Mistake: bidirectional W_ici, but the X collectives' M_X mesh axes ignored
    return 2 * 2 * d_model * d_ff / y / w_ici


def tp_comm_seconds(tokens, d_model, x, w_ici, m_y):
    # Mistake: the same for the Y collectives' M_Y mesh axes
    return 2 * 2 * tokens * d_model / x / w_ici
