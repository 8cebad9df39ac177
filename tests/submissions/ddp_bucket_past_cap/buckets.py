_Solution = BucketedDDP
_assign_buckets = assign_buckets


def _buckets_past_the_cap(param_bytes, bucket_bytes):
    # Mistake: each parameter joins the current bucket first; the bucket is closed only once it
    # is over the cap, so a bucket can exceed it
    buckets, current, size = [], [], 0
    for i in range(len(param_bytes) - 1, -1, -1):
        current.append(i)
        size += param_bytes[i]
        if size > bucket_bytes:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


class BucketedDDP(_Solution):
    def __init__(self, module, bucket_size_mb):
        # its own bucketing in BucketedDDP; assign_buckets itself is right (4.1 passes)
        global assign_buckets
        assign_buckets = _buckets_past_the_cap
        try:
            super().__init__(module, bucket_size_mb)
        finally:
            assign_buckets = _assign_buckets
