class OneFOneBPipeline(OneFOneBPipeline):  # noqa: F821 - the solution's, defined above in the assembled module
    """The solution's schedule, but each micro-batch's loss is not divided by m:
    the gradients are the sum over micro-batches, m times one full-batch step's."""

    def step(self, inputs, targets, loss_fn):
        summed = lambda output, target: loss_fn(output, target) * self.m   # noqa: E731 - undoes the 1/m
        return super().step(inputs, targets, summed)
