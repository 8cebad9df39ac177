"""Attacks on what Landlock does not wall (issue 44): behind Landlock the
student's process keeps the grader's uid, so without the system-call filter's
help it could change the metadata of every file the grader owns (modes,
owners, times, extended attributes), reach a Unix socket outside by a
datagram, open netlink, packet and vsock sockets, and, below Landlock ABI 6,
signal every process of the grader's.

Each attack runs in a process walled in by `jail.confine(namespaces=False)`
exactly as a plain-call worker or a rank's student process is behind Landlock,
once per Landlock ABI the walls accept (capped with the test-only
`landlock.ABI_CAP_ENV`). As root here, the walled process keeps uid 0 with no
capability: it owns the victim files the test made, as a student process
behind Landlock owns the grader's. The victims and a listener live in a
folder outside the sandbox's own.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shardlab.autograder.sandbox import jail, landlock, syscall_filter

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(300),
              pytest.mark.skipif(landlock.abi() < 1, reason=landlock.unavailable() or "no Landlock"),
              pytest.mark.skipif(syscall_filter.available() is not None,
                                 reason=f"no system-call filter here: {syscall_filter.available()}")]

# every ABI the walls accept, up to the kernel's
ABIS = list(range(1, landlock.abi() + 1))

ATTACK = textwrap.dedent(r'''
    import ctypes, errno, fcntl, json, os, resource, socket, sys
    args = json.loads(sys.argv[1])
    from shardlab.autograder.sandbox import jail
    jail.confine(args["submission"], keep=(1, 2), namespaces=False, scratch_in=args["scratch"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    out = {}

    def attempt(name, action):
        try:
            action()
            out[name] = "done"
        except OSError as exc:
            out[name] = errno.errorcode.get(exc.errno, str(exc.errno))

    def raw(number, *values):
        ctypes.set_errno(0)
        result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(v) for v in values))
        if result < 0:
            raise OSError(ctypes.get_errno(), "")
        if args.get("close_result"):
            os.close(result)

    victim, folder = args["victim"], args["folder"]
    attempt("chmod", lambda: os.chmod(victim, 0o777))
    attempt("chmod folder", lambda: os.chmod(folder, 0o777))
    attempt("chown", lambda: os.chown(victim, os.getuid(), os.getgid()))
    attempt("lchown", lambda: os.lchown(victim, os.getuid(), os.getgid()))
    attempt("utime", lambda: os.utime(victim, (0, 0)))
    attempt("setxattr", lambda: os.setxattr(victim, "user.shardlab", b"x"))
    attempt("removexattr", lambda: os.removexattr(args["tagged"], "user.shardlab"))
    attempt("truncate", lambda: os.truncate(victim, 0))
    fd = os.open(args["readable"], os.O_RDONLY)      # a file of the grader's that Landlock lets it read
    attempt("fchmod", lambda: os.fchmod(fd, 0o777))
    attempt("fchown", lambda: os.fchown(fd, os.getuid(), os.getgid()))
    attempt("futimens", lambda: os.utime(fd, (0, 0)))
    attempt("fsetxattr", lambda: os.setxattr(fd, "user.shardlab", b"x"))
    attempt("FS_IOC_SETFLAGS", lambda: fcntl.ioctl(fd, 0x40086602, b"\0" * 8))
    path = ctypes.c_char_p(victim.encode())
    attempt("fchmodat2", lambda: raw(452, -100, ctypes.cast(path, ctypes.c_void_p).value, 0o777, 0))

    def datagram(kind):
        a, b = socket.socketpair(socket.AF_UNIX, kind)
        a.sendto(b"pwned", args["listener"])
    attempt("socketpair dgram + sendto", lambda: datagram(socket.SOCK_DGRAM))
    attempt("socketpair raw + sendto", lambda: datagram(socket.SOCK_RAW))
    attempt("socketpair stream", lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM))
    args["close_result"] = True
    # AF_UNIX with a high bit the kernel drops: the filter must compare what the kernel reads
    attempt("socket(AF_UNIX | 1 << 32)", lambda: raw(41, (1 << 32) | 1, 2, 0))
    attempt("socket(AF_NETLINK)", lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))
    attempt("socket(AF_PACKET)", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))
    attempt("socket(AF_VSOCK)", lambda: socket.socket(40, socket.SOCK_STREAM, 0))
    grader = args["grader"]
    attempt("kill", lambda: os.kill(grader, 0))
    attempt("kill(-1)", lambda: os.kill(-1, 0))
    attempt("tgkill", lambda: raw(234, grader, grader, 0))
    attempt("kill self", lambda: os.kill(os.getpid(), 0))
    r, w = os.pipe()
    attempt("F_SETOWN", lambda: fcntl.fcntl(r, fcntl.F_SETOWN, grader))
    core = resource.getrlimit(resource.RLIMIT_CORE)
    attempt("prlimit(grader)", lambda: resource.prlimit(grader, resource.RLIMIT_CORE, core))
    attempt("setpriority(grader)", lambda: os.setpriority(os.PRIO_PROCESS, grader, 0))
    attempt("own file chmod", lambda: os.chmod(os.environ["TMPDIR"], 0o700))
    with open(os.path.join(os.environ["TMPDIR"], "mine"), "w") as f:
        f.write("own folder still writable")
    print(json.dumps({"results": out, "environ": dict(os.environ)}))
''')

EVERY_JAIL = ("socket(AF_NETLINK)", "socket(AF_PACKET)", "socket(AF_VSOCK)")
METADATA = ("chmod", "chmod folder", "chown", "lchown", "utime", "setxattr", "removexattr", "truncate", "fchmod",
            "fchown", "futimens", "fsetxattr", "FS_IOC_SETFLAGS", "fchmodat2", "own file chmod")
SOCKETS = ("socketpair dgram + sendto", "socketpair raw + sendto", "socketpair stream", "socket(AF_UNIX | 1 << 32)")
SIGNALS = ("kill", "kill(-1)", "tgkill", "F_SETOWN", "prlimit(grader)", "setpriority(grader)")
SIGNALS_AT_EVERY_ABI = ("kill", "tgkill", "prlimit(grader)", "setpriority(grader)")
GRADER_PATH = "/opt/shardlab-graders-own-bin"


def _victims(folder):
    victim = folder / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA the grader's key\n")
    victim.chmod(0o600)
    tagged = folder / "tagged"
    tagged.write_text("x")
    os.setxattr(tagged, "user.shardlab", b"kept")
    return victim, tagged


def _xattr(path):
    try:
        return os.getxattr(path, "user.shardlab")
    except OSError:
        return None


@pytest.fixture(scope="module")
def attacked(tmp_path_factory, request):
    """{ABI: (what each attack got, the walled process's environment, what changed outside)}."""
    out = {}
    for version in ABIS:
        top = tmp_path_factory.mktemp(f"abi{version}")
        outside, sandbox = top / "graders", top / "sandbox"
        outside.mkdir(mode=0o700)
        (sandbox / "staged").mkdir(parents=True)
        victim, tagged = _victims(outside)
        # in the interpreter's prefix, which Landlock lets student code read (the grader's installed files)
        readable = Path(sys.prefix) / f"shardlab-test-victim-{os.getpid()}"
        readable.write_text("installed\n")
        request.addfinalizer(lambda path=readable: path.unlink(missing_ok=True))
        watched = (victim, tagged, readable)
        before = {p.name: (os.stat(p).st_mode, os.stat(p).st_mtime_ns, os.stat(p).st_size) for p in watched}
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        listener.bind(str(outside / "grader.sock"))
        listener.setblocking(False)
        args = {"submission": str(sandbox / "staged"), "scratch": str(sandbox), "victim": str(victim),
                "tagged": str(tagged), "folder": str(outside), "readable": str(readable),
                "listener": str(outside / "grader.sock"), "grader": os.getpid()}
        env = {"PATH": f"{GRADER_PATH}:/usr/bin:/bin", landlock.ABI_CAP_ENV: str(version)}
        done = subprocess.run([sys.executable, "-I", "-c", ATTACK, json.dumps(args)], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        try:
            heard = listener.recv(64)
        except BlockingIOError:
            heard = b""
        after = {p.name: (os.stat(p).st_mode, os.stat(p).st_mtime_ns, os.stat(p).st_size) for p in watched}
        changed = {name for name in before if before[name] != after[name]}
        changed |= {"xattr"} if _xattr(tagged) != b"kept" else set()
        changed |= {"folder mode"} if os.stat(outside).st_mode & 0o777 != 0o700 else set()
        changed |= {"heard"} if heard else set()
        out[version] = (report["results"], report["environ"], changed)
    return out


@pytest.mark.skipif(os.geteuid() != 0, reason="owning the victims as the walled process does needs root here")
@pytest.mark.parametrize("version", ABIS)
def test_no_metadata_changes_outside_at_any_abi(attacked, version):
    results, _, changed = attacked[version]
    assert {name: results[name] for name in METADATA} == dict.fromkeys(METADATA, "EPERM")
    assert changed == set(), changed


@pytest.mark.parametrize("version", ABIS)
def test_no_datagram_or_foreign_socket_at_any_abi(attacked, version):
    results, _, changed = attacked[version]
    assert {name: results[name] for name in SOCKETS + EVERY_JAIL} == dict.fromkeys(SOCKETS + EVERY_JAIL, "EPERM")
    assert "heard" not in changed


@pytest.mark.skipif(os.geteuid() != 0, reason="signalling the grader as its own uid needs root here")
@pytest.mark.parametrize("version", ABIS)
def test_no_signal_leaves_the_sandbox_at_any_abi(attacked, version):
    """Below ABI 6 the filter closes what Landlock's signal scoping does from 6 on. (From 6 on, kill(-1)
    answers 0 although every process refused it, and F_SETOWN is checked when the signal would be sent:
    there they prove nothing either way.)"""
    results, _, _ = attacked[version]
    refused = SIGNALS if version < landlock.SIGNAL_SCOPING_ABI else SIGNALS_AT_EVERY_ABI
    assert {name: results[name] for name in refused} == dict.fromkeys(refused, "EPERM")
    assert results["kill self"] == "done"


@pytest.mark.parametrize("version", ABIS)
def test_student_code_gets_a_fixed_environment(attacked, version):
    _, environ, _ = attacked[version]
    assert GRADER_PATH not in environ["PATH"]
    assert set(environ) == set(jail.STUDENT_ENV) | {"HOME", "TMPDIR"}


ECHO_ENV = ("import os\ndef env():\n    try:\n        original = open('/proc/self/environ', 'rb').read().decode()\n"
            "    except OSError as exc:      # not dumpable: unreadable, which hides it as well\n"
            "        original = str(exc)\n    return [dict(os.environ), original, netlink()]\n"
            "def netlink():\n    import errno, socket\n    try:\n"
            "        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)\n        return 'opened'\n"
            "    except OSError as exc:\n        return errno.errorcode[exc.errno]\n")
RUN = ("import json, sys\nfrom shardlab.autograder.sandbox.process import run_calls, Limits\n"
       "from shardlab.autograder.core.parts import Call\n"
       "from shardlab.autograder.sandbox import jail\n"
       "run = run_calls(sys.argv[1], [Call('echo', 'env', {})], Limits(call_seconds=60, import_seconds=60))\n"
       "print(json.dumps([jail.walls().namespaces, [o.error or o.value for o in run.outcomes]]))\n")


@pytest.mark.parametrize("namespaces", [True, False], ids=["namespaces", "landlock"])
def test_a_real_worker_sees_none_of_the_graders_environment(tmp_path, namespaces):
    """The worker is a fork of a zygote the grader started with its own PATH; what the student reads of its
    environment, in os.environ or the process's original block, holds none of it. And a netlink socket is
    refused behind namespaces as behind Landlock."""
    (tmp_path / "assignments").mkdir()
    (tmp_path / "assignments" / "echo.py").write_text(ECHO_ENV)
    env = {**os.environ, "PATH": f"{GRADER_PATH}:{os.environ.get('PATH', '/usr/bin')}"}
    if not namespaces:
        env[jail.NO_NAMESPACES_ENV] = "1"
    done = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=240, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    walled_by_namespaces, [value] = json.loads(done.stdout.strip().splitlines()[-1])
    if namespaces and not walled_by_namespaces:
        pytest.skip("no namespaces here")
    environ, original, netlink = value
    assert GRADER_PATH not in environ["PATH"] and GRADER_PATH not in original
    assert environ["PATH"] == jail.STUDENT_ENV["PATH"]
    assert netlink == "EPERM"                    # refused in every jail (issue 44)


def test_a_root_process_gets_the_calls_own_answers_without_the_filter(tmp_path):
    """The filter is what answers above: unfiltered, the same process changes the victim's mode and opens a
    netlink socket (so the EPERMs above are not the kernel's own)."""
    victim, _ = _victims(tmp_path)
    code = ("import os, socket, sys\nos.chmod(sys.argv[1], 0o644)\n"
            "socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()\nprint('ok')\n")
    done = subprocess.run([sys.executable, "-I", "-c", code, str(victim)], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == "ok", done.stderr
    assert victim.stat().st_mode & 0o777 == 0o644

