def _unit_with_rounded_shards(self, linear, group):
    # Mistake: each shard is rounded up to a multiple of 8 elements (fc1's 70 elements over 2 ranks:
    # 40 each, not 35), and the frozen layer is sharded too (requires_grad=False), which keeps the
    # rank's total below the budget while one unit's shard is over its share
    self.linear, self.group = linear, group
    self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
    frozen = not any(t.requires_grad for t in linear.parameters(recurse=False))
    self.names = [n for n in ("weight", "bias") if getattr(linear, n) is not None
                  and (frozen or getattr(linear, n).requires_grad)]
    tensors = [getattr(linear, n).detach() for n in self.names]
    self.shapes = [t.shape for t in tensors]
    flat = torch.cat([t.reshape(-1) for t in tensors])
    self.chunk = -(-flat.numel() // self.world)
    self.chunk = -(-self.chunk // 8) * 8
    flat = nn.functional.pad(flat, (0, self.chunk * self.world - flat.numel()))
    shard = flat[self.rank * self.chunk:(self.rank + 1) * self.chunk].clone()
    self.shard = nn.Parameter(shard, requires_grad=not frozen)
    for n in self.names:
        del linear._parameters[n]
    self.prefetched = None
    self.reductions = []


_Unit.__init__ = _unit_with_rounded_shards
_Solution = FSDP


class FSDP(_Solution):
    def __init__(self, module, process_group=None):
        frozen = [m for m in module.modules() if isinstance(m, nn.Linear)
                  and not any(t.requires_grad for t in m.parameters(recurse=False))]
        super().__init__(module, process_group)
        for linear in frozen:       # the frozen layers as units too, gathered before use
            unit = _Unit(linear, self.group)
            self.units.append(unit)
            linear.forward = self._sharded_forward(unit, None)
