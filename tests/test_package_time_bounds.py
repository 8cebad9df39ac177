"""The suite's own time bounds (tests/conftest.py, `helpers.scale_timeout`): pytest-timeout's bound on a
test guards against a hang and grows with the machine's load, so a test that passes idle passes at a
load average of 16 too (issue 44: the tests' bounds must hold there)."""
from __future__ import annotations

import os

import pytest

from helpers import load_factor, scale_timeout

pytestmark = pytest.mark.pure


class _Item:
    """What `scale_timeout` reads and writes of a pytest item."""

    def __init__(self, *marks, session_timeout="120"):
        self.marks = list(marks)
        self.config = type("Config", (), {"getoption": lambda self, name, default=None: None,
                                          "getini": lambda self, name: session_timeout})()

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)

    def add_marker(self, mark, append=True):
        self.marks.insert(len(self.marks) if append else 0, mark.mark)


@pytest.mark.parametrize("load, cores, factor", [(16.0, 2, 8.0), (0.5, 2, 1.0), (6.0, 4, 1.5)])
def test_the_factor_is_the_load_per_core_at_least_one(monkeypatch, load, cores, factor):
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert load_factor() == factor


def test_a_marked_bound_and_the_session_bound_both_grow_with_the_load(monkeypatch):
    monkeypatch.setattr(os, "getloadavg", lambda: (16.0, 16.0, 16.0))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.delenv("PYTEST_TIMEOUT", raising=False)
    marked = _Item(pytest.mark.timeout(900).mark)
    scale_timeout(marked)
    assert marked.get_closest_marker("timeout").args == (7200.0,)      # 900 s idle, 8x at load 16 on 2 cores
    plain = _Item()
    scale_timeout(plain)
    assert plain.get_closest_marker("timeout").args == (960.0,)        # the session's 120 s, 8x
    monkeypatch.setenv("PYTEST_TIMEOUT", "30")
    from_the_environment = _Item()
    scale_timeout(from_the_environment)
    assert from_the_environment.get_closest_marker("timeout").args == (240.0,)   # PYTEST_TIMEOUT before the ini
    monkeypatch.delenv("PYTEST_TIMEOUT")
    unbounded = _Item(session_timeout="0")
    scale_timeout(unbounded)
    assert unbounded.get_closest_marker("timeout") is None             # no bound stays no bound
