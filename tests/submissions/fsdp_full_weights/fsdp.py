class FSDP(nn.Module):
    """Not sharded at all: full weights on every rank, gradients all-reduced (DDP)."""

    def __init__(self, module, process_group=None):
        super().__init__()
        self.module, self.group = module, process_group

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def finish_gradient_synchronization(self):
        world = dist.get_world_size(self.group)
        for p in self.module.parameters():
            if p.grad is not None:
                dist.all_reduce(p.grad, group=self.group)
                p.grad /= world

    def full_state_dict(self):
        return self.module.state_dict()
