"""The jail policy: whether this course may be graded with the walls this
machine has, and what this machine would need for more.

A missing wall (namespaces, Landlock, cgroups, the system-call filter) is
the instructor's set-up, never the student's fault. The `jail` module finds
what this machine has once per process (`jail.walls()`, a level: full,
namespaces, landlock or none); this module applies the course's choice,
`[grading] require_walls` in the course config (`reference.config`):

- "full": every wall up;
- "isolated" (the default): student code cannot see the grader's files,
  behind namespaces or, where user namespaces are refused, Landlock; a
  missing cgroup or filter is said in every report, not refused;
- "unsafe-none": grade even with no walls, student code running as the
  grader's own user with the grader's files in view. Its name says what it is.

Below the course's requirement nothing is graded: `shardlab grade` (and
every grading entry point) refuses with one line naming what is missing and
what gives walls on this machine, and `shardlab walls`, run by the
Gradescope image's setup.sh, fails the image build, so the instructor learns
at upload time, not from a class of zeros. Otherwise every report says which
walls it had (`Report.walls`, shown by the CLI, the JSON, batch feedback and
otter's results). `explain` says, for `shardlab walls`, why each wall is
missing here and the remedy that fits (`causes`).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from shardlab.autograder.core.errors import ShardlabError

UNSAFE = "unsafe-none"
ACCEPTS = {"full": ("full",), "isolated": ("full", "namespaces", "landlock"),
           UNSAFE: ("full", "namespaces", "landlock", "none")}


def current():
    """This machine's walls (autograder.sandbox.jail.Walls), probed once per process."""
    from shardlab.autograder.sandbox import jail
    return jail.walls()


def required_walls(cfg, require: bool = False):
    """The walls grading will use; ShardlabError when they are below the
    course's `require_walls` (or below "full" with `require`)."""
    walls = current()
    wanted = "full" if require else cfg.grading.require_walls
    if walls.level in ACCEPTS[wanted]:
        return walls
    fix = _first_remedy(walls)
    if wanted == "full":
        missing = "; ".join(walls.missing) or walls.describe()
        raise ShardlabError(f"grading refused: the course requires the full jail ([grading] require_walls = "
                            f"\"full\"), and this machine lacks it: {missing} (a set-up problem, not a "
                            f"submission's). {fix}")
    raise ShardlabError(f"grading refused: student code would run as your own user with your files in view "
                        f"({'; '.join(walls.missing)}; a set-up problem, not a submission's). {fix}; or, "
                        f"knowing that, set [grading] require_walls = \"{UNSAFE}\" in the course config")


# ---- why a wall is missing here, and what gives it -------------------------------------------


@dataclass(frozen=True)
class Cause:
    wall: str           # which wall
    why: str            # why it is missing on this machine
    remedy: str         # what would give it


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def apparmor_profile(interpreter: str) -> str:
    """An AppArmor profile (Ubuntu >= 23.10) that lets `interpreter` make user namespaces."""
    return (f"abi <abi/4.0>, include <tunables/global> profile shardlab-python {interpreter} "
            "flags=(unconfined) { userns, }")


def _namespaces_cause() -> Cause:
    interpreter = os.path.realpath(sys.executable)
    elsewhere = "on Gradescope, or in a Linux VM"
    if not sys.platform.startswith("linux"):
        return Cause("namespaces", f"{sys.platform} has no Linux namespaces",
                     "grade on Gradescope, or in a Linux VM (Lima or UTM on macOS, WSL 2 on Windows)")
    from shardlab.autograder.sandbox.jail import NO_NAMESPACES_ENV
    if os.environ.get(NO_NAMESPACES_ENV) == "1":
        return Cause("namespaces", f"turned off by {NO_NAMESPACES_ENV}=1, a test's switch",
                     f"unset {NO_NAMESPACES_ENV}")
    if os.geteuid() == 0:
        return Cause("namespaces", "the grader is root, yet a trial sandbox could not make its namespaces "
                     "(a container without CAP_SYS_ADMIN, or a seccomp or AppArmor profile refusing unshare)",
                     f"grade on the host, {elsewhere}")
    if _read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1":
        return Cause("namespaces", "AppArmor refuses unprivileged user namespaces "
                     "(kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu's default since 23.10)",
                     f"write the AppArmor profile '{apparmor_profile(interpreter)}' to "
                     "/etc/apparmor.d/shardlab-python and run `sudo apparmor_parser -r "
                     f"/etc/apparmor.d/shardlab-python`; or grade with sudo, {elsewhere}")
    if _read("/proc/sys/kernel/unprivileged_userns_clone") == "0":
        return Cause("namespaces", "the kernel refuses unprivileged user namespaces "
                     "(kernel.unprivileged_userns_clone = 0)",
                     f"`sudo sysctl -w kernel.unprivileged_userns_clone=1`, or grade with sudo, {elsewhere}")
    if _read("/proc/sys/user/max_user_namespaces") == "0":
        return Cause("namespaces", "user namespaces are off (user.max_user_namespaces = 0)",
                     f"`sudo sysctl -w user.max_user_namespaces=10000`, or grade with sudo, {elsewhere}")
    return Cause("namespaces", "a trial sandbox could not make its namespaces (unprivileged user namespaces "
                 "refused by this kernel or its security policy)", f"grade with sudo, {elsewhere}")


def causes(walls) -> list[Cause]:
    """Why each wall `walls` lacks is missing here, and the remedy that fits."""
    from shardlab.autograder.sandbox import landlock
    out = []
    if not walls.namespaces:
        out.append(_namespaces_cause())
        if not walls.landlock:
            why = landlock.unavailable() or "a trial process under Landlock saw what it should not"
            remedy = ("add landlock to the kernel's lsm= boot parameter" if "boot" in why
                      else "a Linux kernel >= 5.13 with Landlock enabled")
            out.append(Cause("Landlock", why.removeprefix("no Landlock: "), remedy))
    if not walls.cgroup:
        if os.geteuid() != 0:
            out.append(Cause("cgroup", "a cgroup per sandbox needs root", "grade with sudo"))
        else:
            out.append(Cause("cgroup", "no writable cgroup file system with memory and pids controllers "
                             "(a container's /sys/fs/cgroup is often read-only)",
                             "grade on the host or in a VM, or give the container a writable cgroup"))
    if not walls.syscall_filter:
        from shardlab.autograder.sandbox import syscall_filter
        out.append(Cause("system-call filter", syscall_filter.available() or "libseccomp could not be loaded",
                         "install libseccomp2 (`sudo apt-get install libseccomp2`)"))
    return out


def _first_remedy(walls) -> str:
    found = causes(walls)
    if not found:
        return "See `shardlab walls`"
    first = found[0]
    return f"Walls on this machine: {first.remedy}"


def explain(walls, cfg) -> list[str]:
    """`shardlab walls`: the level, then each missing wall with why and the remedy."""
    wanted = cfg.grading.require_walls
    verdict = "grading goes on" if walls.level in ACCEPTS[wanted] else "grading refuses"
    lines = [f"level: {walls.level} (the course requires {wanted!r}: {verdict})"]
    for cause in causes(walls):
        lines += [f"missing: {cause.wall}: {cause.why}", f"  remedy: {cause.remedy}"]
    return lines
