"""How the endings of a scenario's ranks become one outcome, in words a
student can act on. One module for the grader's worker groups
(`sandbox.gloo.group`) and the starter kit's local ranks
(`local`), which ships with this module, so a hang or a crash reads
the same on a laptop as in the feedback.

A rank ends a scenario in one of three ways: ("ok", value), ("error",
{"error": text, "collectives": n performed}) or ("died", None). `where[r]`
is the collective rank r was blocked in when last heard of (None: running
Python code), `last[r]` the last one it entered.
"""
from __future__ import annotations

# what gloo and torch's monitored barrier say when a collective times out
TIMEOUT_MARKS = ("Timed out", "timed out", "monitoredBarrier")


def unfinished(world_size: int, got: dict, where: list, seconds: float) -> str:
    """No rank failed, but some never finished within the deadline."""
    stuck = "; ".join(f"rank {r} " + (f"was stuck in {where[r]}" if where[r]
                                      else "was running Python code, in no collective")
                      for r in range(world_size) if r not in got)
    return f"did not finish within {seconds:g} s: {stuck}"


def failure(world_size: int, failed: dict, where: list, last: list) -> tuple[str, str]:
    """(state, text) for a scenario in which some rank failed. State: "died"
    (a rank's process ended: it explains the others' errors), "hung" (a
    collective timed out), "clean-error" (every rank raised before its first
    collective: the group is still usable) or "error"."""
    dead = sorted(r for r, v in failed.items() if v[0] == "died")
    if dead:
        r = dead[0]
        at = (f" while in {where[r]}" if where[r]
              else f" after {last[r]}" if last[r] else " before its first collective")
        return "died", f"rank {r} ended its process{at}"
    first = min(failed)
    text = failed[first][1]["error"]
    if any(mark in text for mark in TIMEOUT_MARKS):
        return "hung", f"rank {first} hung: {text}"
    clean = len(failed) == world_size and all(v[1]["collectives"] == 0 for v in failed.values())
    return ("clean-error" if clean else "error"), f"rank {first}: {text}"
