"""How much memory a process tree holds: the sum of PSS (proportional set
size: shared pages divided among their sharers) over a process and all its
descendants, sampled while it runs. PSS sums without double counting the
pages forked ranks share with their fork server, which RSS would count once
per process. Read from /proc/<pid>/smaps_rollup (Linux)."""
from __future__ import annotations

import os
import threading


def pss_bytes(pid: int) -> int:
    """The process's PSS in bytes; 0 when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration, ValueError):
        return 0


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants (ranks are grandchildren: fork server -> ranks)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


class PeakSampler:
    """Samples a process tree's summed PSS every `interval` seconds in a
    thread, from `start(pid)` to `stop()`: `peak_bytes`, `peak_processes`."""

    def __init__(self, interval: float = 0.02):
        self.interval, self.peak_bytes, self.peak_processes = interval, 0, 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, pid: int) -> "PeakSampler":
        def sample():
            while not self._stop.is_set():
                pids = process_tree(pid)
                self.peak_bytes = max(self.peak_bytes, sum(pss_bytes(p) for p in pids))
                self.peak_processes = max(self.peak_processes, len(pids))
                self._stop.wait(self.interval)
        self._thread = threading.Thread(target=sample, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
