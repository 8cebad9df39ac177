import os

_Solution = BucketedDDP


class BucketedDDP(_Solution):
    def __init__(self, module, bucket_size_mb):
        super().__init__(module, bucket_size_mb)
        if dist.get_rank() == 1:
            # Hostile: rank 1 ends its process in the middle of the backward pass
            self.params[0].register_post_accumulate_grad_hook(lambda p: os._exit(0))
