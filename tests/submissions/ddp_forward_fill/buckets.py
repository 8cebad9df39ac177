def assign_buckets(param_bytes, bucket_bytes):
    # Mistake: fills buckets from the first parameter, not the last
    buckets, size = [], 0
    for i, nbytes in enumerate(param_bytes):
        if not buckets or size + nbytes > bucket_bytes:
            buckets.append([])
            size = 0
        buckets[-1].append(i)
        size += nbytes
    return buckets
