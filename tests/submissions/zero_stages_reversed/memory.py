def zero_bytes_per_device(num_params, stage, n_dp):
    # Mistake: the stages shard in the model's order, weights first (stage 1 the weights,
    # stage 2 also the gradients, stage 3 also the optimizer state)
    weights, grads, optimizer = 2 * num_params, 2 * num_params, 12 * num_params
    sharded_from_stage = {0: (), 1: ("weights",), 2: ("weights", "grads"),
                          3: ("weights", "grads", "optimizer")}[stage]
    total = 0.0
    for name, nbytes in (("weights", weights), ("grads", grads), ("optimizer", optimizer)):
        total += nbytes / n_dp if name in sharded_from_stage else nbytes
    return total
