"""The `gloo` probe of the grading engine (engine/probes.py, PROBES).

A distributed part is a Part with probe="gloo" whose cases are
Call(<student module>, <scenario name>, {"world_size": N, ...}); the scenario
(autograder/sandbox/gloo/ranks/scenarios/) runs on every rank and the part's comparator
gets the list of the ranks' values. `run_gloo` runs all such calls of one
submission: one fork server, one worker group per world size reused by
every call, identical calls (several parts judging the same run) once.

With `traced` (indices into `calls`), those calls' outcomes also carry the
run's trace (Outcome.trace: each rank's events, timed by its trusted
process), for the timeline the feedback draws; other runs send none.

After a hang or a dead rank, the rest of that scenario's calls (of that
student function's, for `run_function`) are not run: each would only cost
the same deadline again.
"""
from __future__ import annotations

import json
import os

from shardlab.autograder.sandbox.gloo.group import GLOO, ForkServer, GlooLimits, GroupError
from shardlab.autograder.sandbox.gloo.seeds import data_seed
from shardlab.autograder.engine.parts import Call
from shardlab.autograder.engine.phases import phase
from shardlab.autograder.sandbox.process import Limits, Outcome, SandboxRun

_PREPARED: dict[str, ForkServer] = {}


def prepare(root: str, limits: Limits = Limits()) -> None:
    """Start the fork server now (it imports torch while the grader computes expectations)."""
    key = os.path.abspath(root)
    if key not in _PREPARED:
        _PREPARED[key] = ForkServer(key, limits)


def _key(call: Call) -> str:
    return json.dumps([call.module, call.function, call.args], sort_keys=True)


def _keyed(call: Call) -> Call:
    """The call as the ranks run it: its public seed replaced by the secret one."""
    if "seed" not in call.args:
        return call
    return Call(call.module, call.function, {**call.args, "seed": data_seed(call.args["seed"])})


def _what(call: Call) -> str:
    """What a hang is blamed on: the scenario, or the student function it runs."""
    return call.args.get("function") or call.function


def run_gloo(root: str, calls: list[Call], limits: Limits = Limits(), gloo: GlooLimits = GLOO,
             traced: frozenset[int] = frozenset()) -> SandboxRun:
    """Evaluate every call against the submission at `root`. `limits` gives
    the ranks' memory limit; `gloo` the timeouts; `traced` the calls whose
    trace is wanted (module docstring)."""
    server = _PREPARED.pop(os.path.abspath(root), None) or ForkServer(root, limits, gloo)
    traced_keys = {_key(calls[k]) for k in traced}
    unique: dict[str, Call] = {}
    for call in calls:
        unique.setdefault(_key(call), call)
    by_size: dict[int, list[str]] = {}
    for key, call in unique.items():
        by_size.setdefault(int(call.args.get("world_size", 0)), []).append(key)
    results: dict[str, Outcome] = {}
    restarts = 0
    try:
        for world_size, keys in sorted(by_size.items()):
            group, given_up = None, {}
            for key in keys:
                call = unique[key]
                what = _what(call)
                if what in given_up:
                    results[key] = Outcome(error=f"not run: an earlier {what} run {given_up[what]}")
                    continue
                if world_size < 1:
                    results[key] = Outcome(error="scenario call without a world_size")
                    continue
                try:
                    if group is None:
                        with phase(f"start {world_size} ranks", lane="gloo"):
                            group = server.spawn(world_size)
                except GroupError as exc:
                    results[key] = Outcome(error=str(exc))
                    continue
                with phase(f"{call.function} on {world_size}", lane="gloo"):
                    outcome, state = group.run(_keyed(call), server.gloo.scenario_seconds, key in traced_keys)
                results[key] = outcome
                if state in ("hung", "died"):
                    given_up[what] = "hung" if state == "hung" else "ended a rank"
                if state not in ("ok", "clean-error"):
                    group.kill()
                    group, restarts = None, restarts + 1
            if group:
                group.kill()
    finally:
        server.close()
    return SandboxRun(outcomes=[results[_key(c)] for c in calls],
                      output=server.output.decode("utf-8", "replace"),
                      output_bytes=server.printed[0], restarts=restarts)


run_gloo.prepare = prepare
run_gloo.traces = True
