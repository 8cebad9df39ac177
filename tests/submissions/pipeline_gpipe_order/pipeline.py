class OneFOneBPipeline:
    """Right gradients, right messages, GPipe's order: every micro-batch's
    forward before any backward, so stage s holds all m micro-batches."""

    def __init__(self, stage_module, stage, num_stages, num_microbatches):
        self.module, self.stage, self.num_stages, self.m = stage_module, stage, num_stages, num_microbatches

    def step(self, inputs, targets, loss_fn):
        s, m, last = self.stage, self.m, self.stage == self.num_stages - 1
        micro_inputs, micro_targets = inputs.chunk(m), targets.chunk(m)
        held, sends = [], []
        for i in range(m):                               # Mistake: all forwards first
            if s == 0:
                x = micro_inputs[i]
            else:
                x = torch.empty_like(micro_inputs[i])
                dist.recv(x, src=s - 1)
                x.requires_grad_()
            y = self.module(x)
            if last:
                y = loss_fn(y, micro_targets[i]) / m
            else:
                sends.append(dist.isend(y.detach(), dst=s + 1))
            held.append((x, y))
        for x, y in held:                                # then all backwards
            if last:
                y.backward()
            else:
                grad = torch.empty_like(y)
                dist.recv(grad, src=s + 1)
                y.backward(grad)
            if s > 0:
                sends.append(dist.isend(x.grad, dst=s - 1))
        for work in sends:
            work.wait()
