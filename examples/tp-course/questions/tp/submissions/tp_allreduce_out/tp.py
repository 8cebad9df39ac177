# ruff: noqa: F821 - an overlay: appended to solution.py, whose torch, dist and helpers it uses
def ffn_forward_2d(inputs, w_in, w_out, x_group, y_group):
    """All-reduces the partial Out along Y and keeps its own column block: the right values, twice the bytes."""
    y = dist.get_world_size(y_group)
    in_full = _gather_columns(inputs, y_group)
    x = dist.get_world_size(x_group)
    w_in_full = torch.empty(x * w_in.shape[0], w_in.shape[1], dtype=w_in.dtype)
    dist.all_gather_into_tensor(w_in_full, w_in.contiguous(), group=x_group)
    partial = (in_full @ w_in_full) @ _gather_columns(w_out, x_group)
    dist.all_reduce(partial, group=y_group)
    cols = partial.shape[1] // y
    j = dist.get_rank(y_group)
    return partial[:, j * cols:(j + 1) * cols].contiguous()
