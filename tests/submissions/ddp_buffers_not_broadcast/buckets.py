_Solution = BucketedDDP


class BucketedDDP(_Solution):
    def __init__(self, module, bucket_size_mb):
        # Mistake: only the parameters are broadcast, not the buffers (the model's random `shift`)
        module.buffers = lambda *args, **kwargs: iter(())
        try:
            super().__init__(module, bucket_size_mb)
        finally:
            del module.buffers
