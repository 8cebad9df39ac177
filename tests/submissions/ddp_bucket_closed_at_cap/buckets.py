def assign_buckets(param_bytes, bucket_bytes):
    # Mistake: off by one at the cap (>= for >): a parameter that would fill the bucket
    # exactly to bucket_bytes starts a new one
    buckets, current, size = [], [], 0
    for i in range(len(param_bytes) - 1, -1, -1):
        if current and size + param_bytes[i] >= bucket_bytes:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += param_bytes[i]
    if current:
        buckets.append(current)
    return buckets
