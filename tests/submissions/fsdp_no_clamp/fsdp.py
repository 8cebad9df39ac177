def max_devices_before_comm_bound(tokens, unit_params, alpha, beta, flops_per_second, bytes_per_param=2):
    # Mistake: solves for p but returns the formula's value even below one device
    slack = unit_params * (2 * tokens / flops_per_second - bytes_per_param / beta)
    exponent = slack / alpha if alpha > 0 else math.inf
    if exponent >= 1024:
        return math.inf
    return math.pow(2.0, exponent)
