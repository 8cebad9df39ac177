# ruff: noqa: F821 - an overlay: appended to solution.py, whose torch, dist and helpers it uses
def ffn_forward_2d(inputs, w_in, w_out, x_group, y_group):
    """Gathers In's column blocks along X (the FSDP axis) instead of Y: the shapes fit, the rows are wrong."""
    y = dist.get_world_size(y_group)
    in_full = _gather_columns(inputs, x_group)
    x = dist.get_world_size(x_group)
    w_in_full = torch.empty(x * w_in.shape[0], w_in.shape[1], dtype=w_in.dtype)
    dist.all_gather_into_tensor(w_in_full, w_in.contiguous(), group=x_group)
    partial = (in_full @ w_in_full) @ _gather_columns(w_out, x_group)
    rows, cols = partial.shape[0], partial.shape[1] // y
    by_rank = partial.reshape(rows, y, cols).permute(1, 0, 2).reshape(y * rows, cols)
    out = torch.empty(rows, cols, dtype=partial.dtype)
    dist.reduce_scatter_tensor(out, by_rank.contiguous(), group=y_group)
    return out
