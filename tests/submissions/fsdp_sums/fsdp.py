def _finish_without_average(self):
    for work, out in self.reductions:
        work.wait()
        self.shard.grad = out if self.shard.grad is None else self.shard.grad + out
    self.reductions = []


_Unit.finish = _finish_without_average
