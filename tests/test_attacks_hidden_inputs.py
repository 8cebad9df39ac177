"""Attacks on the hidden inputs through values that are shown (issue 44).

A student function records every input it is called with in a module global,
and a later call returns them packed into its value. A public case's
feedback echoes what it returned (up to 200 characters), so if a process ran
a hidden call before a public one, the hidden inputs came back in the
public case's feedback: all seven of 1.1's for a third of a point. The same
for a gloo rank's student process, whose public run's value and trace are
shown, where the course's hidden and public runs share a world size.

The grader's answer (`sandbox.hidden_last`): every public call of a grading
first, in processes that have seen no hidden input; the hidden ones after,
once every probe is done with its public calls.
"""
from __future__ import annotations

import hashlib
import json
import re
import threading
import time

import pytest

from shardlab.autograder.core.parts import Call
from shardlab.autograder.engine import grading
from shardlab.autograder.engine.plan import part_cases
from shardlab.autograder.questions import questions
from shardlab.autograder.sandbox.gloo.group import GlooLimits
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.core import phases
from shardlab.autograder.sandbox.hidden_last import Gate, Party
from shardlab.autograder.sandbox.process import Limits, run_calls

# every function of the module records its call, and returns the digests (24 bits each) of the 18 calls
# before it, newest first, packed into one integer: its 130 digits with separators fit the 200 characters a
# public case's feedback echoes
RECORDER = '''
import hashlib, json
SEEN = []

def digest(function, args):
    return hashlib.sha1(json.dumps([function, list(args)], default=str).encode()).hexdigest()[:6]

def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    def recorder(*args):
        packed = int("1" + "".join(reversed(SEEN[-18:])), 16)
        SEEN.append(digest(name, args))
        return packed
    return recorder

def run_as_a_rank(*args):
    """For gloo's run_function: every earlier call's arguments, in order."""
    SEEN.append(json.dumps(list(args)))
    return list(SEEN)
'''


def _unpacked(text: str) -> set[str]:
    """The digests packed in every integer of `text` (a feedback line shows one with thousands separators)."""
    out = set()
    for number in re.findall(r"\d[\d,]{9,}", text):
        packed = hex(int(number.replace(",", "")))[3:]          # past "0x1"
        out.update(packed[k:k + 6] for k in range(0, len(packed) - 5, 6))
    return out


def _digest(call: Call) -> str:
    return hashlib.sha1(json.dumps([call.function, list(call.args.values())], default=str).encode()).hexdigest()[:6]


@pytest.fixture(scope="module")
def recorder_submission(tmp_path_factory):
    root = tmp_path_factory.mktemp("recorder")
    (root / "assignments").mkdir()
    for module in ("memory", "hostile"):
        (root / "assignments" / f"{module}.py").write_text(RECORDER)
    return root


@pytest.mark.sandbox
def test_a_public_case_never_echoes_a_hidden_input(recorder_submission, cfg):
    """A real grading of question 1 (1.1 has one public and seven hidden cases)."""
    report = grading.grade_folder(recorder_submission, cfg, modules={"memory"})
    [question] = [q for q in questions(cfg) if q.module == "memory"]
    hidden, public = set(), set()
    for part in question.parts:
        if part.kind == "auto":
            for case in part_cases(cfg, part.id):
                (public if case.public else hidden).update(_digest(c) for c in case.calls)
    hidden -= public                                 # a call a public case makes too is no secret
    shown = " ".join(p.feedback for q in report.questions for p in q.parts)
    read_back = _unpacked(shown)
    assert len(hidden) >= 7
    assert read_back & public, shown[:2000]          # the channel is open: public inputs come back
    assert read_back & hidden == set(), shown[:2000]


@pytest.mark.sandbox
def test_a_worker_runs_every_public_call_before_a_hidden_one(recorder_submission):
    calls = [Call("hostile", "f", {"x": 1}), Call("hostile", "f", {"x": 11111}, hidden=True),
             Call("hostile", "f", {"x": 2}), Call("hostile", "f", {"x": 22222}, hidden=True)]
    run = run_calls(str(recorder_submission), calls, Limits(call_seconds=30, import_seconds=60))
    values = [_unpacked(f"{o.value:,}") if isinstance(o.value, int) else o for o in run.outcomes]
    assert all(isinstance(v, set) for v in values), run.outcomes
    secret = {_digest(calls[1]), _digest(calls[3])}
    assert not (values[0] | values[2]) & secret
    assert _digest(calls[0]) in values[2], [o.value for o in run.outcomes]   # the public calls share a worker
    assert _digest(calls[1]) in values[3]            # the hidden ones after them, in a worker of their own


@pytest.mark.sandbox
def test_a_public_gloo_run_never_carries_a_hidden_one_of_its_world_size(recorder_submission):
    def call(x: int, hidden: bool = False) -> Call:
        return Call("hostile", "run_function", {"world_size": 2, "function": "run_as_a_rank", "args": [x]},
                    hidden=hidden)
    calls = [call(1), call(424242, hidden=True), call(2), call(434343, hidden=True)]
    run = run_gloo(str(recorder_submission), calls, Limits(import_seconds=60),
                   gloo=GlooLimits(scenario_seconds=60), traced=frozenset({0, 1, 2}))
    for outcome in run.outcomes:
        assert outcome.error is None, outcome.error
    public_values = json.dumps([run.outcomes[0].value, run.outcomes[2].value])
    assert "424242" not in public_values and "434343" not in public_values
    assert "[1]" in json.dumps(run.outcomes[2].value)       # one group ran them, in order: the channel is there
    assert "[2]" in json.dumps(run.outcomes[1].value)       # the hidden runs came after the public ones
    assert run.outcomes[1].trace is None                    # a hidden run is never traced
    assert run.outcomes[0].trace is not None


@pytest.mark.sandbox
def test_a_group_started_ahead_for_the_hidden_runs_has_seen_no_public_input(recorder_submission, monkeypatch):
    """The public runs on 2 ranks, the hidden one on 3: its group is started during the public phase
    (`launch._Lanes`), before the gate, and runs the hidden input first and alone."""
    def call(x: int, world_size: int, hidden: bool = False) -> Call:
        return Call("hostile", "run_function", {"world_size": world_size, "function": "run_as_a_rank",
                                                "args": [x]}, hidden=hidden)

    class Watched(Party):
        def public_done(self):
            said.append(time.time())
            super().public_done()

    said: list[float] = []
    monkeypatch.setenv(phases.ENV, "on")
    monkeypatch.setattr(phases, "_spans", [])
    calls = [call(1, 2), call(2, 2), call(515151, 3, hidden=True)]
    run = run_gloo(str(recorder_submission), calls, Limits(import_seconds=60),
                   gloo=GlooLimits(scenario_seconds=60), gate=Watched(Gate(1)))
    for outcome in run.outcomes:
        assert outcome.error is None, outcome.error
    assert [r["value"] for r in run.outcomes[2].value] == [[json.dumps([515151])]] * 3    # its one input, alone
    [start] = [s for s in phases._spans if s["name"] == "start 3 ranks"]
    assert start["end"] <= said[0]                  # started before the public phase was over


@pytest.mark.pure
def test_the_gate_opens_once_every_probe_is_done_with_its_public_calls():
    gate = Gate(2)
    calls_probe, gloo_probe = gate.party(), gate.party()
    opened = []
    waiter = threading.Thread(target=lambda: opened.append(calls_probe.wait(None)))
    waiter.start()
    calls_probe.public_done()
    calls_probe.public_done()                       # said twice (its finally, then the engine's): counted once
    time.sleep(0.2)
    assert opened == []                             # the gloo probe still runs public calls
    gloo_probe.public_done()
    waiter.join(5)
    assert opened == [True]
    late = Gate(2).party()
    assert late.wait(time.monotonic() + 0.05) is False     # the budget ran out first: no hidden call runs
