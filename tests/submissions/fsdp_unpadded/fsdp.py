_padded_init = _Unit.__init__


def _unpadded_init(self, linear, group):
    # No padding: when P does not divide by p the last rank's shard is shorter,
    # so the ranks' all-gathers disagree in size.
    _padded_init(self, linear, group)
    mine = sum(math.prod(s) for s in self.shapes) - self.rank * self.chunk
    if 0 < mine < self.chunk:
        self.shard = nn.Parameter(self.shard.detach()[:mine].clone())


_Unit.__init__ = _unpadded_init
