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

Hidden runs come last (`sandbox.hidden_last`): every public run of every
world size first, then, once the grading's gate opens, the hidden ones, on
the groups the public phase left (up to LANES of them) or fresh ones. So no
rank that reports a public run's value or trace has seen a hidden input,
even where the hidden and public runs share a world size.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from shardlab.autograder.sandbox.gloo.group import GLOO, ForkServer, GlooLimits, GroupError, WorkerGroup
from shardlab.autograder.sandbox.gloo.seeds import data_seed
from shardlab.autograder.core.parts import Call
from shardlab.autograder.core.phases import phase
from shardlab.autograder.sandbox import zygote
from shardlab.autograder.sandbox.hidden_last import Party
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
             traced: frozenset[int] = frozenset(), gate: Party | None = None) -> SandboxRun:
    """Evaluate every call against the submission at `root`. `limits` gives
    the ranks' memory limit; `gloo` the timeouts; `traced` the calls whose
    trace is wanted (module docstring; never a hidden one's); `gate` the
    grading's (`hidden_last`): every public run first, the hidden ones once it opens."""
    gate = gate or Party.alone()
    server = ForkServer(root, limits, gloo)
    unique: dict[str, Call] = {}
    for call in calls:
        unique.setdefault(_key(call), call)
    public_keys = {_key(c) for c in calls if not c.hidden}          # a run some public case shares is public
    # keyed here, in the caller's context: the grading's data seed key (`seeds.pool_key`) is a
    # context variable, which the lanes' threads would not see
    keyed = {key: _keyed(call) for key, call in unique.items()}
    lanes = _Lanes(server, limits, unique, keyed, {_key(calls[k]) for k in traced} & public_keys)
    try:
        try:
            lanes.run_phase([k for k in unique if k in public_keys], later=[k for k in unique if k not in public_keys])
        finally:
            gate.public_done()
        hidden = [k for k in unique if k not in public_keys]
        if hidden and gate.wait(limits.deadline):
            lanes.run_phase(hidden, later=[])
        for key in hidden:              # the gate stayed shut: the grading's budget ran out first
            lanes.results.setdefault(key, Outcome(error=OUT_OF_BUDGET))
    finally:
        lanes.kill_all()
        server.close()
    return SandboxRun(outcomes=[lanes.results[_key(c)] for c in calls],
                      output=server.output.decode("utf-8", "replace"),
                      output_bytes=server.printed[0], restarts=lanes.restarts)


class _Lanes:
    """The worker groups of one submission, one per world size, LANES of them side by side; a group lives on
    from the public phase into the hidden one (it has seen no hidden input before), at most LANES of them."""

    def __init__(self, server: ForkServer, limits: Limits, unique: dict[str, Call], keyed: dict[str, Call],
                 traced: set[str]):
        self.server, self.limits, self.unique, self.keyed, self.traced = server, limits, unique, keyed, traced
        self.groups: dict[int, WorkerGroup] = {}
        self.given_up: dict[int, dict[str, str]] = {}           # world size -> scenario -> "hung" / "ended a rank"
        self.results: dict[str, Outcome] = {}
        self.restarts = 0

    def run_phase(self, keys: list[str], later: list[str]) -> None:
        """Run `keys`, each world size's in order, the smallest sizes first (the largest then starts beside a
        smaller one's tail); a group that `later` keys need is kept, while at most LANES are."""
        by_size: dict[int, list[str]] = {}
        for key in keys:
            by_size.setdefault(int(self.unique[key].args.get("world_size", 0)), []).append(key)
        needed = {int(self.unique[key].args.get("world_size", 0)) for key in later}
        with ThreadPoolExecutor(max_workers=LANES) as pool:
            for done in [pool.submit(self._run_size, n, ks, n in needed) for n, ks in sorted(by_size.items())]:
                done.result()
        for size in sorted(self.groups, reverse=True):          # the largest go first: they cost the most
            if size not in needed or len(self.groups) > LANES:
                self.groups.pop(size).kill()

    def kill_all(self) -> None:
        for group in self.groups.values():
            group.kill()
        self.groups.clear()

    def _run_size(self, world_size: int, keys: list[str], kept: bool) -> None:
        """`keys` on the group of `world_size`, in order; the group is killed after them unless `kept`."""
        try:
            self._run_keys(world_size, keys)
        finally:
            if not kept and world_size in self.groups:
                self.groups.pop(world_size).kill()

    def _run_keys(self, world_size: int, keys: list[str]) -> None:
        given_up = self.given_up.setdefault(world_size, {})
        lane = f"gloo {world_size} ranks"
        for key in keys:
            call = self.unique[key]
            what = _what(call)
            if what in given_up:
                self.results[key] = Outcome(error=f"not run: an earlier {what} run {given_up[what]}")
                continue
            if self.limits.left() <= 0:          # the grading's budget: nothing more is started
                self.results[key] = Outcome(error=OUT_OF_BUDGET)
                continue
            if world_size < 1:
                self.results[key] = Outcome(error="scenario call without a world_size")
                continue
            try:
                if world_size not in self.groups:
                    with phase(f"start {world_size} ranks", lane=lane):
                        self.groups[world_size] = self.server.spawn(world_size)
            except GroupError as exc:
                self.results[key] = Outcome(error=str(exc))
                continue
            group = self.groups[world_size]
            with phase(f"{call.function} on {world_size}", lane=lane):
                seconds = min(self.server.gloo.scenario_seconds, max(0.1, self.limits.left()))
                outcome, state = group.run(self.keyed[key], seconds, key in self.traced)
            self.results[key] = outcome
            if state in ("hung", "died"):
                given_up[what] = "hung" if state == "hung" else "ended a rank"
            if state not in ("ok", "clean-error"):
                self.groups.pop(world_size).kill()
                self.restarts += 1


# the probe's optional attributes (`probes.StartingProbe`, `probes.TracingProbe`);
# ignore: mypy does not model attributes set on a function
run_gloo.prepare = prepare          # type: ignore[attr-defined]
run_gloo.traces = True              # type: ignore[attr-defined]
