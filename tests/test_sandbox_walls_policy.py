"""No unwalled grading by default (autograder/sandbox/walls.py): the levels a
machine has, what each `[grading] require_walls` accepts, the one-line
refusal, the older `require_jail`, and `shardlab walls` explaining why a wall
is missing on this machine and what would give it.

The expected table follows docs/trust.md: "isolated" (the default) grades
behind namespaces or Landlock, "full" only behind every wall, "unsafe-none"
behind anything; the machine's walls are stand-ins (`jail.walls` patched)."""
from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from shardlab.autograder import cli
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.sandbox import jail
from shardlab.autograder.sandbox import walls as policy
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

FULL = jail.Walls(True, True, syscall_filter=True)
NO_CGROUP = jail.Walls(True, False, ("no per-sandbox cgroup: the grader is not root",), syscall_filter=True)
LANDLOCK = jail.Walls(False, False, ("no namespaces: a trial sandbox failed", "no per-sandbox cgroup: the grader "
                                     "is not root"), landlock=True, syscall_filter=True)
NONE = jail.Walls(False, False, ("no namespaces on darwin", "no Landlock: not Linux",
                                 "no per-sandbox cgroup: the grader is not root"))
MACHINES = {"full": FULL, "namespaces": NO_CGROUP, "landlock": LANDLOCK, "none": NONE}


class Course:
    def __init__(self, require_walls: str):
        self.grading = SimpleNamespace(require_walls=require_walls)


@pytest.mark.parametrize("level, machine", list(MACHINES.items()))
def test_each_machine_has_its_level(level, machine):
    assert machine.level == level
    assert jail.Walls(True, True, ("no system-call filter: libseccomp.so.2 is not installed",)).level == "namespaces"


@pytest.mark.parametrize("required, accepted", [
    ("full", {"full"}),
    ("isolated", {"full", "namespaces", "landlock"}),
    ("unsafe-none", {"full", "namespaces", "landlock", "none"}),
])
def test_what_each_requirement_accepts(monkeypatch, required, accepted):
    for level, machine in MACHINES.items():
        monkeypatch.setattr(jail, "walls", lambda machine=machine: machine)
        if level in accepted:
            assert policy.required_walls(Course(required)) is machine
        else:
            with pytest.raises(ShardlabError, match="^grading refused"):
                policy.required_walls(Course(required))


def test_the_default_course_refuses_no_walls_in_one_line_naming_the_way_out(monkeypatch):
    monkeypatch.setattr(jail, "walls", lambda: NONE)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert load_config().grading.require_walls == "isolated"
    with pytest.raises(ShardlabError) as refused:
        policy.required_walls(load_config())
    message = str(refused.value)
    assert "\n" not in message
    assert "your own user with your files in view" in message
    assert "no namespaces on darwin" in message                      # why
    assert "Linux VM" in message and "Gradescope" in message        # what gives walls here
    assert 'require_walls = "unsafe-none"' in message               # the opt-in, named as unsafe
    assert "not a submission's" in message


def test_missing_cgroups_alone_still_grade_and_say_so(monkeypatch):
    monkeypatch.setattr(jail, "walls", lambda: NO_CGROUP)
    assert policy.required_walls(load_config()).describe() == "lighter walls (no per-sandbox cgroup: the grader " \
                                                              "is not root)"


def test_reports_name_the_level():
    assert FULL.describe().startswith("full walls")
    assert LANDLOCK.describe().startswith("lighter walls: Landlock instead of namespaces (no namespaces")
    assert NONE.describe().startswith("no walls: student code ran as the grader's user, with its files in view")


# ---- the config key, and its older boolean form -------------------------------------------


def _course_file(tmp_path, text: str):
    path = tmp_path / "course.toml"
    path.write_text("[grading]\n" + text + "\n")
    return path


@pytest.mark.parametrize("text, level", [
    ('require_walls = "full"', "full"), ('require_walls = "unsafe-none"', "unsafe-none"),
    ("require_jail = true", "full"), ("require_jail = false", "isolated"), ("", "isolated"),
])
def test_require_walls_and_the_older_require_jail(tmp_path, text, level):
    assert load_config(_course_file(tmp_path, text)).grading.require_walls == level


@pytest.mark.parametrize("text, error", [
    ('require_walls = "none"', r"\[grading\]\.require_walls must be one of 'full', 'isolated', 'unsafe-none'"),
    ('require_walls = "full"\nrequire_jail = true', "sets both require_walls and require_jail"),
])
def test_a_wrong_requirement_is_one_line(tmp_path, text, error):
    with pytest.raises(ShardlabError, match=error) as refused:
        load_config(_course_file(tmp_path, text))
    assert "\n" not in str(refused.value)


# ---- why a wall is missing here, and the remedy ---------------------------------------------


def _linux_user(monkeypatch, sysctls: dict[str, str], uid: int = 1000):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.delenv(jail.NO_NAMESPACES_ENV, raising=False)
    monkeypatch.setattr(policy.os, "geteuid", lambda: uid)
    monkeypatch.setattr(policy, "_read", lambda path: sysctls.get(path))


def test_ubuntus_apparmor_restriction_gets_a_profile_for_this_interpreter(monkeypatch):
    _linux_user(monkeypatch, {"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1"})
    cause = policy.causes(LANDLOCK)[0]
    assert "kernel.apparmor_restrict_unprivileged_userns = 1" in cause.why
    interpreter = policy.os.path.realpath(sys.executable)
    assert f"profile shardlab-python {interpreter} flags=(unconfined) {{ userns, }}" in cause.remedy
    assert "apparmor_parser -r /etc/apparmor.d/shardlab-python" in cause.remedy and "sudo" in cause.remedy


def test_debians_sysctl_gets_the_sysctl(monkeypatch):
    _linux_user(monkeypatch, {"/proc/sys/kernel/unprivileged_userns_clone": "0"})
    cause = policy.causes(LANDLOCK)[0]
    assert "kernel.unprivileged_userns_clone = 0" in cause.why
    assert "sysctl -w kernel.unprivileged_userns_clone=1" in cause.remedy


def test_root_without_namespaces_is_a_container(monkeypatch):
    _linux_user(monkeypatch, {}, uid=0)
    cause = policy.causes(LANDLOCK)[0]
    assert "container" in cause.why and "VM" in cause.remedy


def test_macos_gets_gradescope_or_a_vm(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    cause = policy.causes(NONE)[0]
    assert cause.why == "darwin has no Linux namespaces"
    assert "Gradescope" in cause.remedy and "Linux VM" in cause.remedy


def test_every_missing_wall_has_its_cause(monkeypatch):
    _linux_user(monkeypatch, {})
    no_filter = jail.Walls(False, False, ("no namespaces: x", "no Landlock: x", "no per-sandbox cgroup: x",
                                          "no system-call filter: x"))
    walls = [c.wall for c in policy.causes(no_filter)]
    assert walls == ["namespaces", "Landlock", "cgroup", "system-call filter"]
    remedies = {c.wall: c.remedy for c in policy.causes(no_filter)}
    assert remedies["cgroup"] == "grade with sudo" and "libseccomp2" in remedies["system-call filter"]


def test_the_walls_command_names_the_level_each_missing_wall_and_its_remedy(monkeypatch, capsys):
    _linux_user(monkeypatch, {"/proc/sys/kernel/apparmor_restrict_unprivileged_userns": "1"})
    monkeypatch.setattr(jail, "walls", lambda: LANDLOCK)
    monkeypatch.setattr(sys, "argv", ["shardlab", "walls"])
    with pytest.raises(SystemExit) as exit_info:
        cli.main()
        raise SystemExit(0)
    assert exit_info.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == LANDLOCK.describe()
    assert lines[1] == "level: landlock (the course requires 'isolated': grading goes on)"
    assert lines[2].startswith("missing: namespaces: AppArmor refuses unprivileged user namespaces")
    assert lines[3].startswith("  remedy: write the AppArmor profile")
    assert lines[4] == "missing: cgroup: a cgroup per sandbox needs root"
    assert lines[5] == "  remedy: grade with sudo"
