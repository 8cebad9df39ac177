"""Where a grading spends its time: named spans, recorded only when the
environment variable SHARDLAB_PHASES names a file (the grading benchmark
sets it), and written there as JSON when the process exits.

A span is {"name", "lane", "start", "end"} in wall-clock seconds (time.time(),
so the benchmark can place them against the moment it started the process).
Lanes are what runs side by side: the grader's main thread, the reference
thread computing expected values, each probe's sandbox.

    with phase("scoring"):
        ...
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time
from contextlib import contextmanager

ENV = "SHARDLAB_PHASES"
_spans: list[dict] = []
_lock = threading.Lock()


@contextmanager
def phase(name: str, lane: str = "grader"):
    if not os.environ.get(ENV):
        yield
        return
    start = time.time()
    try:
        yield
    finally:
        with _lock:
            _spans.append(dict(name=name, lane=lane, start=start, end=time.time()))


def mark(name: str, lane: str = "grader") -> None:
    """A zero-length span: a moment (e.g. the grader's imports done)."""
    with phase(name, lane):
        pass


def _write() -> None:
    path = os.environ.get(ENV)
    if path and _spans:
        with open(path, "w") as f:
            json.dump(_spans, f)


atexit.register(_write)
