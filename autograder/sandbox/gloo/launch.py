"""The `gloo` probe of the grading engine (`probes.PROBES`).

A distributed part is a Part with probe="gloo" whose cases are
Call(<student module>, <scenario name>, {"world_size": N, ...}); the scenario
(the `kit.scenarios` package) runs on every rank and the part's comparator
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
from concurrent.futures import ThreadPoolExecutor

from shardlab.autograder.sandbox.gloo.group import GLOO, ForkServer, GlooLimits, GroupError
from shardlab.autograder.sandbox.gloo.seeds import data_seed
from shardlab.autograder.core.parts import Call
from shardlab.autograder.core.phases import phase
from shardlab.autograder.sandbox import zygote
from shardlab.autograder.sandbox.process import OUT_OF_BUDGET, Limits, Outcome, SandboxRun

# World sizes whose groups run at once. Two lanes keep both cores busy (the
# ranks mostly wait on each other and on the grader); a third lane saved
# about 0.7 s of a warm grading but added a whole 4-rank group (8 processes)
# to the peak: 605-700 MB against 525 MB, over the 600 MB budget.
LANES = 2

def prepare(root: str, limits: Limits = Limits()) -> None:
    """Start the zygote now: it imports torch while the grader computes expectations."""
    try:
        zygote.shared()
    except OSError:             # the batch's zygote is gone: the first start falls back
        zygote.forget_shared()


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
    server = ForkServer(root, limits, gloo)
    traced_keys = {_key(calls[k]) for k in traced}
    unique: dict[str, Call] = {}
    for call in calls:
        unique.setdefault(_key(call), call)
    by_size: dict[int, list[str]] = {}
    for key, call in unique.items():
        by_size.setdefault(int(call.args.get("world_size", 0)), []).append(key)
    # keyed here, in the caller's context: the grading's data seed key (`seeds.pool_key`) is a
    # context variable, which the lanes' threads below would not see
    keyed = {key: _keyed(call) for key, call in unique.items()}
    results: dict[str, Outcome] = {}
    restarts = [0]

    def run_size(world_size: int, keys: list[str]) -> None:
        group = None
        given_up: dict[str, str] = {}           # scenario -> "hung" / "ended a rank"
        lane = f"gloo {world_size} ranks"
        try:
            for key in keys:
                call = unique[key]
                what = _what(call)
                if what in given_up:
                    results[key] = Outcome(error=f"not run: an earlier {what} run {given_up[what]}")
                    continue
                if limits.left() <= 0:          # the grading's budget: nothing more is started
                    results[key] = Outcome(error=OUT_OF_BUDGET)
                    continue
                if world_size < 1:
                    results[key] = Outcome(error="scenario call without a world_size")
                    continue
                try:
                    if group is None:
                        with phase(f"start {world_size} ranks", lane=lane):
                            group = server.spawn(world_size)
                except GroupError as exc:
                    results[key] = Outcome(error=str(exc))
                    continue
                with phase(f"{call.function} on {world_size}", lane=lane):
                    seconds = min(server.gloo.scenario_seconds, max(0.1, limits.left()))
                    outcome, state = group.run(keyed[key], seconds, key in traced_keys)
                results[key] = outcome
                if state in ("hung", "died"):
                    given_up[what] = "hung" if state == "hung" else "ended a rank"
                if state not in ("ok", "clean-error"):
                    group.kill()
                    group, restarts[0] = None, restarts[0] + 1
        finally:
            if group:
                group.kill()

    try:
        # each world size has its own group, LANES of them side by side, the
        # smallest first: the largest then starts beside a smaller one's tail
        with ThreadPoolExecutor(max_workers=LANES) as pool:
            for done in [pool.submit(run_size, n, keys) for n, keys in sorted(by_size.items())]:
                done.result()
    finally:
        server.close()
    return SandboxRun(outcomes=[results[_key(c)] for c in calls],
                      output=server.output.decode("utf-8", "replace"),
                      output_bytes=server.printed[0], restarts=restarts[0])


# the probe's optional attributes (`probes.StartingProbe`, `probes.TracingProbe`);
# ignore: mypy does not model attributes set on a function
run_gloo.prepare = prepare          # type: ignore[attr-defined]
run_gloo.traces = True              # type: ignore[attr-defined]
