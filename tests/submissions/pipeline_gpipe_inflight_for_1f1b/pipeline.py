def inflight_microbatches(schedule, p, m, stage):
    # Mistake: GPipe's count for every schedule, as if 1F1B ran every forward before its first backward
    if schedule not in ("afab", "gpipe", "1f1b"):
        raise ValueError(f"unknown schedule {schedule!r}")
    return m
