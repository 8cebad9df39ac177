def is_communication_bound(tokens, unit_params, p, alpha, beta, flops_per_second, bytes_per_param=2):
    """Strictly longer (`>`) where the docstring says equal times count as bound."""
    comm = allgather_seconds(unit_params * bytes_per_param, p, alpha, beta)  # noqa: F821 - the solution's
    return bool(comm > forward_seconds(tokens, unit_params, flops_per_second))  # noqa: F821
