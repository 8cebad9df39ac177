import torch.distributed as _torch_dist


class _NoBroadcast:
    """torch.distributed as the solution's BucketedDDP uses it, but broadcast does nothing."""

    def __getattr__(self, name):
        return getattr(_torch_dist, name)

    def broadcast(self, tensor, src=0, **kwargs):
        # Mistake: rank 0's parameters and buffers are never broadcast: each rank keeps the
        # initial weights it was given, and the ranks train different models
        return None


dist = _NoBroadcast()
