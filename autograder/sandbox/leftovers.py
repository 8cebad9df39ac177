"""Nothing a grading leaves behind, even when its grader is killed.

A grader normally cleans up after itself: each sandbox kills and removes
its cgroup and deletes its staging folder (`process.Sandbox.close`), and
the gloo ranks and workers die with their parents (PR_SET_PDEATHSIG, and
the PID namespace of the jail). A grader killed with SIGKILL (batch's
timeout does this) runs none of that. So everything a grading creates on
the machine carries its grader's pid in its name, `shardlab-<pid>-...`:
its temporary folders (`private_folder`) and its cgroups
(`jail.Cgroup.create`). Whoever outlives the grader sweeps them:
`platforms.batch` sweeps the pid of a child it had to kill, and every
grader, as it starts, sweeps the leftovers of graders that are no longer
alive (`sweep_dead`), which covers a grader killed by anything else.

A sweep kills every process still in those cgroups before removing them:
a student process that escaped its parent's death (it can reset its
parent-death signal and start a new session) is still in its cgroup.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from shardlab.autograder.sandbox.jail import KILL_WAIT_SECONDS, Cgroup, kill_until_gone

_NAMED = re.compile(r"shardlab-(\d+)-")


def private_folder(kind: str) -> str:
    """A new 0700 temporary folder of this grader, named shardlab-<pid>-<kind>-<random>."""
    return tempfile.mkdtemp(prefix=f"{prefix(kind)}")


def prefix(kind: str) -> str:
    """The name every temporary folder of this grader's `kind` starts with."""
    return f"shardlab-{os.getpid()}-{kind}-"


def _alive(pid: int) -> bool:
    """Whether `pid` is a running process. A zombie is not: a grader that died orphaned
    (its grading service killed) waits for an init that may never reap it, and until it
    is reaped its pid cannot be anyone else's, so sweeping for it is safe."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:             # someone else's process: alive
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


def session_members(session: int) -> list[int]:
    """Live (not zombie) processes whose session id is `session` (field 6 of /proc/<pid>/stat)."""
    members = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and fields[3] == str(session) and fields[0] not in ("Z", "X"):
            members.append(int(pid))
    return members


def kill_session(session: int, seconds: float = KILL_WAIT_SECONDS) -> list[int]:
    """SIGKILL every process of `session` (a sandbox's processes start in one: the worker's or the fork
    server's), again until none is alive or `seconds` have passed. Returns the survivors (none, unless the
    machine cannot kill them in that time: the caller says so). A process that left the session is the
    cgroup's to kill, or the PID namespace's (docs/trust.md, "Nothing left behind")."""
    return kill_until_gone(lambda: session_members(session), seconds)


def sweep(grader_pid: int) -> list[str]:
    """Kill and remove what a (dead) grader with this pid left: its cgroups, with every
    process still in them, and its temporary folders. Returns what was removed."""
    removed = []
    for group in Cgroup.left_by(grader_pid):
        group.kill()
        group.remove()
        removed += list(group.dirs.values())
    base = Path(tempfile.gettempdir())
    for folder in base.glob(f"shardlab-{grader_pid}-*"):
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(str(folder))
    return removed


def sweep_dead() -> list[str]:
    """`sweep` every grader pid named in a temporary folder or a cgroup whose process is gone
    (a pid taken since by another process is left alone: its leftovers wait for the next sweep)."""
    names = [p.name for p in Path(tempfile.gettempdir()).glob("shardlab-*")]
    names += [os.path.basename(d) for group in Cgroup.left_by(None) for d in group.dirs.values()]
    pids = {int(m.group(1)) for name in names if (m := _NAMED.match(name))}
    removed = []
    for pid in sorted(pids):
        if pid != os.getpid() and not _alive(pid):
            removed += sweep(pid)
    return removed
