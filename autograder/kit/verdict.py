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

import re

from .student_values import without_library_paths

# what gloo and torch's monitored barrier say when a collective times out
TIMEOUT_MARKS = ("Timed out", "timed out", "monitoredBarrier")

# the grader's point-to-point ops end a timed-out send or recv with this (`sandbox.gloo.ranks.p2p`);
# where the ranks' blocked sends explain the hang, the cause is named instead (`send_cycle`)
PAIRING_ADVICE = ("Sends and recvs must pair up in the same order on both ranks; with gloo a send waits for "
                  "its recv, so two ranks that both send (or both receive) first wait for each other")

# where a rank is blocked, as the tracer labels it (`tracing`): a blocking send, or the wait of an
# isend ("waiting for isend to rank 1 #2 (96 bytes, step 1)"); a failed rank's error ends with it
_SEND_LABEL = r"(?:waiting for )?i?send to rank (\d+) #\d+"
_BLOCKED_IN = re.compile(r"^" + _SEND_LABEL)
_FAILED_IN = re.compile(r"\[in " + _SEND_LABEL + r"[^\[\]]*\]$")


def _sending_to(r: int, failed: dict, where: list) -> int | None:
    """The rank that rank r is blocked sending to, or None (not blocked in a send)."""
    entry = failed.get(r)
    if entry is not None and entry[0] == "error" and isinstance(entry[1], dict):
        found = _FAILED_IN.search(str(entry[1].get("error", "")).strip())
        if found:
            return int(found.group(1))
    found = _BLOCKED_IN.match(where[r] or "") if r < len(where) else None
    return int(found.group(1)) if found else None


def send_cycle(world_size: int, failed: dict, where: list) -> list[int] | None:
    """Ranks each blocked in a send to the next, the last to the first (a deadlock of sends:
    none of them posts the recv another waits for), or None."""
    peer = {r: _sending_to(r, failed, where) for r in range(world_size)}
    for start in range(world_size):
        path: list[int] = []
        r: int | None = start
        while r is not None and 0 <= r < world_size and r not in path:
            path.append(r)
            r = peer[r]
        if r is not None and r in path and len(path) - path.index(r) >= 2:
            return path[path.index(r):]
    return None


# where a rank waits for a message: a blocking recv, or the wait of an irecv ("waiting for irecv from rank 1 #2
# (96 bytes, step 1)"); a failed rank's error ends with it ("... [in recv from rank 1 #1 (96 bytes, step 1)]")
_RECV_FROM = re.compile(r"(?:waiting for )?i?recv from rank (\d+)")
_BLOCKED_AT = re.compile(r"\[in ([^\[\]]*)\]$")


def _blocked_in(r: int, failed: dict, where: list) -> str | None:
    """The operation rank r was blocked in, as the tracer labels it, or None."""
    entry = failed.get(r)
    if entry is not None and entry[0] == "error" and isinstance(entry[1], dict):
        found = _BLOCKED_AT.search(str(entry[1].get("error", "")).strip())
        if found:
            return found.group(1)
    return where[r] if r < len(where) and where[r] else None


def positions(world_size: int, finished: set, failed: dict, where: list) -> str:
    """Where every rank was when the run stopped, in one sentence: "Ranks 0 and 1 finished; rank 2 was
    in recv from rank 1; rank 3 was in ..." (a rank in none: running Python code)."""
    done = sorted(finished)
    said = [("Rank " if len(done) == 1 else "Ranks ") + _listed(done) + " finished"] if done else []
    for r in range(world_size):
        if r in finished:
            continue
        op = _blocked_in(r, failed, where)
        op = op and op.split(" #")[0]         # the op and its peer: the first rank's detail has the rest
        ended = failed.get(r, ("",))[0] == "died"
        said.append(f"rank {r} " + ("ended its process" if ended else f"was in {op}" if op
                                    else "was running Python code, in no collective"))
    text = "; ".join(said)
    return text[:1].upper() + text[1:]


def _listed(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}" if len(ranks) > 1 else str(ranks[0])


def likely_cause(world_size: int, finished: set, failed: dict, where: list) -> str | None:
    """Why ranks blocked in a recv wait, when the others say it: the rank it waits for finished its step
    without sending (a stage that sends fewer messages than its neighbour receives), or two ranks wait in a
    recv for each other (both receive first). None when nothing explains it."""
    waits = {}
    for r in range(world_size):
        found = _RECV_FROM.match(_blocked_in(r, failed, where) or "") if r not in finished else None
        if found:
            waits[r] = int(found.group(1))
    for r, peer in sorted(waits.items()):
        if peer in finished:
            return (f"likely cause: rank {peer} finished its step without sending rank {r} the message it "
                    f"waits for (check what each stage sends, and to whom)")
        if waits.get(peer) == r:
            return (f"likely cause: ranks {min(r, peer)} and {max(r, peer)} each wait in a recv for the "
                    f"other's send (both receive before they send)")
    return None


def deadlock_of_sends(cycle: list[int]) -> str:
    """Why ranks each blocked in a send hang, and the two ways out."""
    ranks = ", ".join(map(str, cycle[:-1])) + f" and {cycle[-1]}"
    other = "the other's" if len(cycle) == 2 else "the next one's"
    return (f"deadlock: ranks {ranks} each wait in a blocking send for {other} recv (a gloo send returns "
            f"only once its recv is posted). Use isend/irecv (or dist.batch_isend_irecv), or order the "
            f"sends so that one stage receives before it sends")


def unfinished(world_size: int, got: dict, where: list, seconds: float) -> str:
    """No rank failed, but some never finished within the deadline."""
    stuck = "; ".join(f"rank {r} " + (f"was stuck in {where[r]}" if where[r]
                                      else "was running Python code, in no collective")
                      for r in range(world_size) if r not in got)
    done = sorted(got)
    if done:
        stuck += f"; {'rank' if len(done) == 1 else 'ranks'} {_listed(done)} finished"
    cycle = send_cycle(world_size, {}, [None if r in got else where[r] for r in range(world_size)])
    cause = likely_cause(world_size, set(got), {}, where)
    why = f" ({deadlock_of_sends(cycle)})" if cycle else f" ({cause})" if cause else ""
    return f"did not finish within {seconds:g} s: {stuck}{why}"


def failure(world_size: int, failed: dict, where: list, last: list,
            finished: frozenset[int] | set[int] = frozenset()) -> tuple[str, str]:
    """(state, text) for a scenario in which some rank failed (`finished`: the ranks that
    gave a value). State: "died" (a rank's process ended: it explains the others'
    errors), "hung" (a collective timed out: the text says where every rank was and,
    where the ranks' positions say it, the likely cause), "clean-error" (every rank
    raised before its first collective: the group is still usable) or "error"."""
    dead = sorted(r for r, v in failed.items() if v[0] == "died")
    if dead:
        r = dead[0]
        at = (f" while in {where[r]}" if where[r]
              else f" after {last[r]}" if last[r] else " before its first collective")
        return "died", f"rank {r} ended its process{at}"
    first = min(failed)
    text = failed[first][1]["error"]
    if any(mark in text for mark in TIMEOUT_MARKS):
        cycle = send_cycle(world_size, failed, where)
        if cycle:
            detail = " ".join(text.replace(PAIRING_ADVICE, "").split())
            return "hung", f"rank {first} hung: {deadlock_of_sends(cycle)}. Rank {first}: {detail}"
        cause = likely_cause(world_size, set(finished), failed, where)
        if cause is None:
            return "hung", f"rank {first} hung: {text}"
        detail = " ".join(without_library_paths(text.replace(PAIRING_ADVICE, "")).split())
        return "hung", (f"rank {first} hung: {cause}. {positions(world_size, set(finished), failed, where)}. "
                        f"Rank {first}: {detail}")
    # clean: the group can run the next scenario; not when a rank's trusted half failed the run while
    # its student process was still in it (`mid_run`): that process's leftover frames would be read next
    clean = len(failed) == world_size and all(v[1]["collectives"] == 0 and not v[1].get("mid_run")
                                              for v in failed.values())
    return ("clean-error" if clean else "error"), f"rank {first}: {text}"
