import torch.distributed as _torch_dist


class _NoWork:
    def wait(self, *args, **kwargs):
        return True


class _Rank0SkipsOnce:
    """Stands in for torch.distributed in the solution's code above."""

    skipped = False

    def __getattr__(self, name):
        return getattr(_torch_dist, name)

    def all_reduce(self, tensor, *args, **kwargs):
        # Mistake: rank 0 skips its first all-reduce; from then on the ranks disagree
        if _torch_dist.get_rank() == 0 and not _Rank0SkipsOnce.skipped:
            _Rank0SkipsOnce.skipped = True
            return _NoWork()
        return _torch_dist.all_reduce(tensor, *args, **kwargs)


dist = _Rank0SkipsOnce()
