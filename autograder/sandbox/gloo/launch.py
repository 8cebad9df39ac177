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
import threading
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
# Groups alive at once, at most: the LANES running and one more, kept from the public phase for the hidden
# one or started ahead for it (the shipped course's 3-rank group: 470 -> 492 MB peak for its grading).
GROUPS_ALIVE = LANES + 1

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
    """The worker groups of one submission, one per world size, LANES of them running side by side and
    GROUPS_ALIVE alive at most; a group lives on from the public phase into the hidden one (it has seen no
    hidden input before)."""

    def __init__(self, server: ForkServer, limits: Limits, unique: dict[str, Call], keyed: dict[str, Call],
                 traced: set[str]):
        self.server, self.limits, self.unique, self.keyed, self.traced = server, limits, unique, keyed, traced
        self.groups: dict[int, WorkerGroup] = {}
        self.given_up: dict[int, dict[str, str]] = {}           # world size -> scenario -> "hung" / "ended a rank"
        self.results: dict[str, Outcome] = {}
        self.restarts = 0
        self._lock = threading.Lock()       # the lanes' threads share `groups`
        self._running: set[int] = set()     # the world sizes whose runs a lane is running
        self._starting = 0                  # groups being started, counted against GROUPS_ALIVE

    def run_phase(self, keys: list[str], later: list[str]) -> None:
        """Run `keys`, each world size's in order on its own group, the sizes with the most work first (each
        lane then ends about when the other does); keep the groups that `later` keys need. A lane with no
        size of this phase left starts the group of each size only `later` keys need, while GROUPS_ALIVE
        allows, so that the next phase starts on ready groups (a fresh group has seen no input)."""
        by_size: dict[int, list[str]] = {}
        for key in keys:
            by_size.setdefault(self._size(key), []).append(key)
        needed = {self._size(key) for key in later}
        ahead = sorted(needed - set(by_size) - set(self.groups), key=lambda n: -self._work(later, n))
        with ThreadPoolExecutor(max_workers=LANES) as pool:
            busy = [pool.submit(self._run_size, n, by_size[n], n in needed)
                    for n in sorted(by_size, key=lambda n: -self._work(keys, n))]
            busy += [pool.submit(self._start_ahead, n) for n in ahead]
            for done in busy:
                done.result()

    def kill_all(self) -> None:
        with self._lock:
            for group in self.groups.values():
                group.kill()
            self.groups.clear()

    def _size(self, key: str) -> int:
        return int(self.unique[key].args.get("world_size", 0))

    def _work(self, keys: list[str], world_size: int) -> int:
        """What a world size's runs among `keys` cost, roughly: runs times ranks."""
        return world_size * sum(1 for key in keys if self._size(key) == world_size)

    def _start(self, world_size: int, lane: str, now: bool) -> None:
        """Start the group of `world_size` into `groups`, GROUPS_ALIVE kept: a lane that needs it `now` first
        kills a kept group no lane is running (the largest: they cost the most); a start ahead is dropped
        instead. GroupError if the group does not start."""
        with self._lock:
            while len(self.groups) + self._starting >= GROUPS_ALIVE:
                if not now:
                    return
                idle = [n for n in self.groups if n not in self._running]
                if not idle:
                    break
                self.groups.pop(max(idle)).kill()
            self._starting += 1
        try:
            with phase(f"start {world_size} ranks", lane=lane):
                group = self.server.spawn(world_size)
        finally:
            with self._lock:
                self._starting -= 1
        with self._lock:
            self.groups[world_size] = group

    def _start_ahead(self, world_size: int) -> None:
        """The group of `world_size`, started now for the next phase. A start that fails (or a spent
        budget) leaves it to that phase, which starts it again and reports a failure as its runs'."""
        if world_size < 1 or self.limits.left() <= 0:
            return
        try:
            self._start(world_size, f"gloo {world_size} ranks", now=False)
        except GroupError:
            pass

    def _run_size(self, world_size: int, keys: list[str], kept: bool) -> None:
        """`keys` on the group of `world_size`, in order; the group is killed after them unless `kept`."""
        with self._lock:
            self._running.add(world_size)
        try:
            self._run_keys(world_size, keys)
        finally:
            with self._lock:
                self._running.discard(world_size)
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
                    self._start(world_size, lane, now=True)
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
                with self._lock:
                    self.groups.pop(world_size).kill()
                self.restarts += 1


# the probe's optional attributes (`probes.StartingProbe`, `probes.TracingProbe`);
# ignore: mypy does not model attributes set on a function
run_gloo.prepare = prepare          # type: ignore[attr-defined]
run_gloo.traces = True              # type: ignore[attr-defined]
