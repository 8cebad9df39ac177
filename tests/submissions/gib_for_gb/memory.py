import math


def devices_needed(total_bytes, device_bytes):
    # Mistake: total converted to "GB" with 2**30, capacity quoted in GB (1e9 bytes)
    total_gb = total_bytes / 2**30
    return math.ceil(total_gb / (device_bytes / 1e9))
