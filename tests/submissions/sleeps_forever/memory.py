import time


def devices_needed(total_bytes, device_bytes):
    time.sleep(10**6)
