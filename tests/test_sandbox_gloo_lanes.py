"""How the gloo probe schedules its worker groups (`gloo.launch._Lanes`), on a fake fork server.

The public phase runs each world size's runs on its own group, LANES side by
side; a lane with nothing of the phase left starts the group of a world size
only the hidden runs need, so the hidden phase starts on it instead of
waiting for its start; never more than GROUPS_ALIVE groups live at once. The
fake groups run in a few milliseconds and record what they ran, so these
tests see the schedule itself (the real runs: test_attacks_hidden_inputs.py).
"""
from __future__ import annotations

import threading
import time

import pytest

from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox.gloo import launch
from shardlab.autograder.sandbox.gloo.group import GroupError
from shardlab.autograder.sandbox.process import Limits, Outcome

pytestmark = pytest.mark.pure


class FakeServer:
    """Spawns fake groups, counting the ones alive; `fail` world sizes refuse to start (once each)."""

    class gloo:
        scenario_seconds = 5.0

    def __init__(self, fail: set[int] = frozenset(), run_seconds: float = 0.01):
        self.lock = threading.Lock()
        self.events: list[tuple] = []         # ("spawn", n, group id) / ("run", n, group id, x) / ("kill", ...)
        self.alive, self.most_alive = 0, 0
        self.fail, self.run_seconds = set(fail), run_seconds
        self.made = 0

    def note(self, *event) -> None:
        with self.lock:
            self.events.append(event)

    def spawn(self, world_size: int) -> "FakeGroup":
        time.sleep(self.run_seconds)
        with self.lock:
            if world_size in self.fail:
                self.fail.discard(world_size)
                raise GroupError(f"the {world_size} ranks did not start")
            self.made += 1
            self.alive += 1
            self.most_alive = max(self.most_alive, self.alive)
            group = FakeGroup(self, world_size, self.made)
        self.note("spawn", world_size, group.id)
        return group


class FakeGroup:
    def __init__(self, server: FakeServer, world_size: int, id: int):
        self.server, self.world_size, self.id, self.dead = server, world_size, id, False

    def run(self, call: Call, seconds: float, traced: bool):
        assert not self.dead
        time.sleep(self.server.run_seconds)
        self.server.note("run", self.world_size, self.id, call.args["x"])
        return Outcome(value=call.args["x"]), "ok"

    def kill(self) -> None:
        if not self.dead:
            self.dead = True
            with self.server.lock:
                self.server.alive -= 1
            self.server.note("kill", self.world_size, self.id)


def run(x: int, world_size: int) -> Call:
    return Call("m", "f", {"world_size": world_size, "x": x})


def lanes_for(server: FakeServer, calls: list[Call]) -> tuple[launch._Lanes, dict[int, str]]:
    unique = {launch._key(c): c for c in calls}
    lanes = launch._Lanes(server, Limits(), unique, unique, set())    # type: ignore[arg-type]
    return lanes, {c.args["x"]: launch._key(c) for c in calls}


def both_phases(server: FakeServer, public: list[Call], hidden: list[Call]) -> tuple[launch._Lanes, int]:
    """The two phases as `run_gloo` runs them; returns the lanes and how many events the public phase made."""
    lanes, key = lanes_for(server, public + hidden)
    later = [key[c.args["x"]] for c in hidden]
    lanes.run_phase([key[c.args["x"]] for c in public], later=later)
    public_events = len(server.events)
    lanes.run_phase(later, later=[])
    lanes.kill_all()
    return lanes, public_events


def test_a_world_size_only_hidden_runs_need_is_started_in_the_public_phase():
    server = FakeServer()
    public = [run(x, 2) for x in range(1, 7)] + [run(10, 4)]
    hidden = [run(100 + x, 3) for x in range(3)] + [run(200, 4)]
    lanes, cut = both_phases(server, public, hidden)
    spawns_before = [e[1] for e in server.events[:cut] if e[0] == "spawn"]
    spawns_after = [e[1] for e in server.events[cut:] if e[0] == "spawn"]
    assert sorted(spawns_before) == [2, 3, 4]      # the 3-rank group started while the 2-rank runs went on
    assert spawns_after == []                      # the hidden phase starts on ready groups
    [three] = {e[2] for e in server.events if e[0] == "spawn" and e[1] == 3}
    ran_on_three = [e[3] for e in server.events if e[0] == "run" and e[2] == three]
    assert ran_on_three == [100, 101, 102]         # a fresh group: nothing of the public phase ran on it
    assert all(lanes.results[launch._key(c)].value == c.args["x"] for c in public + hidden)
    assert server.alive == 0


def test_never_more_groups_alive_than_the_bound():
    """Public runs on two sizes, hidden ones on five: a group started ahead only while the bound allows,
    the rest started in the hidden phase; every run still runs."""
    server = FakeServer()
    public = [run(x, 2) for x in range(1, 9)] + [run(20, 5)]
    hidden = [run(100 + n, n) for n in (2, 3, 4, 5, 6)]
    lanes, cut = both_phases(server, public, hidden)
    assert server.most_alive <= launch.GROUPS_ALIVE
    assert [e for e in server.events[:cut] if e[0] == "kill"] == []     # no kept group made room for one ahead
    assert all(lanes.results[launch._key(c)].value == c.args["x"] for c in public + hidden)
    assert server.alive == 0


def test_the_sizes_with_the_most_work_start_first():
    """Three world sizes on two lanes: the 2-rank runs (10 of them) and the 4-rank ones (4) start at once,
    the single 3-rank run waits for a free lane."""
    server = FakeServer()
    public = [run(x, 2) for x in range(10)] + [run(50, 3)] + [run(60 + x, 4) for x in range(4)]
    both_phases(server, public, [])
    first_two = [e[1] for e in server.events if e[0] == "spawn"][:2]
    assert sorted(first_two) == [2, 4]


def test_a_group_that_does_not_start_ahead_is_started_again_for_its_runs():
    server = FakeServer(fail={3})
    lanes, cut = both_phases(server, [run(1, 2)], [run(100, 3), run(101, 3)])
    assert [e[1] for e in server.events[cut:] if e[0] == "spawn"] == [3]
    assert [lanes.results[launch._key(run(x, 3))].value for x in (100, 101)] == [100, 101]


def test_every_group_is_killed_when_the_phases_end():
    server = FakeServer()
    both_phases(server, [run(1, 2), run(2, 4)], [run(3, 3), run(4, 2)])
    spawned = {e[2] for e in server.events if e[0] == "spawn"}
    killed = [e[2] for e in server.events if e[0] == "kill"]
    assert sorted(killed) == sorted(spawned)       # each once


def test_kept_groups_make_room_for_the_next_size_a_lane_runs():
    """Public runs on four sizes the hidden runs all need: each kept after its runs, until a lane needs room
    for the next; the hidden phase starts again what was killed."""
    server = FakeServer()
    public = [run(10 * n + x, n) for n in (2, 3, 4, 5) for x in range(3)]
    hidden = [run(100 + n, n) for n in (2, 3, 4, 5)]
    lanes, cut = both_phases(server, public, hidden)
    assert server.most_alive <= launch.GROUPS_ALIVE
    assert all(lanes.results[launch._key(c)].value == c.args["x"] for c in public + hidden)
    kept = {e[1] for e in server.events[:cut] if e[0] == "spawn"} - {e[1] for e in server.events[:cut]
                                                                     if e[0] == "kill"}
    assert len(kept) == launch.GROUPS_ALIVE        # as many as the bound allows live on into the hidden phase
    assert server.alive == 0


def test_a_group_nothing_later_needs_is_killed_when_its_runs_are_done():
    server = FakeServer()
    _, cut = both_phases(server, [run(1, 2), run(2, 4)], [run(3, 2)])
    [four] = {e[2] for e in server.events if e[0] == "spawn" and e[1] == 4}
    assert ("kill", 4, four) in server.events[:cut]
