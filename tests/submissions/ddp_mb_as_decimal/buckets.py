_Solution = BucketedDDP


class BucketedDDP(_Solution):
    def __init__(self, module, bucket_size_mb):
        # Mistake: a MB taken as 10**6 bytes (the solution multiplies by 2**20)
        super().__init__(module, bucket_size_mb * 10**6 / 2**20)
