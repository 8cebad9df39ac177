class BucketedDDP(torch.nn.Module):
    """Written from the issue's description of a real mistake: a gradient hook that
    writes the gradient into its bucket, points .grad at the bucket and also returns
    the gradient, so autograd accumulates it into the bucket a second time."""

    def __init__(self, module, bucket_size_mb):
        super().__init__()
        self.module = module
        with torch.no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(t, src=0)
        self.params = [p for p in module.parameters() if p.requires_grad]
        sizes = [p.numel() * p.element_size() for p in self.params]
        self.buckets = assign_buckets(sizes, bucket_size_mb * 2**20)
        self.flats, self.views, self.handles = [], {}, []
        for members in self.buckets:
            flat = torch.zeros(sum(self.params[i].numel() for i in members))
            offset = 0
            for i in members:
                n = self.params[i].numel()
                self.views[i] = (len(self.flats), flat[offset:offset + n].view_as(self.params[i]))
                offset += n
            self.flats.append(flat)
        self.ready = [0] * len(self.buckets)
        for i, p in enumerate(self.params):
            p.register_hook(self._into_bucket(i))
            p.register_post_accumulate_grad_hook(self._count(i))

    def _into_bucket(self, i):
        def hook(grad):
            b, view = self.views[i]
            with torch.no_grad():
                view.copy_(grad)
            self.params[i].grad = view
            return grad         # Mistake: autograd now adds grad into .grad (the bucket) again
        return hook

    def _count(self, i):
        def hook(param):
            b, _ = self.views[i]
            self.ready[b] += 1
            if self.ready[b] == len(self.buckets[b]):
                self.handles.append(dist.all_reduce(self.flats[b], async_op=True))
        return hook

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def finish_gradient_synchronization(self):
        for handle in self.handles:
            handle.wait()
        self.handles = []
        with torch.no_grad():
            for flat in self.flats:
                flat /= dist.get_world_size()
        self.ready = [0] * len(self.buckets)
