"""Attacks on staging (issue 10, deliverable 5): a submission that reaches
outside itself through the file system.

The grader copies the submission before student code runs, as a user who can
read what the student cannot. A link in the upload would make that copy
carry a root-only file, the grader's cache or the answer key into the
sandbox. Each attack below must be refused with one line naming the path,
both by `autograder.sandbox.staging.stage` and through `shardlab grade` (exit 2, no
traceback), and nothing of the outside file may appear anywhere.
"""
import json
import os
import shutil
import socket
import stat
import zipfile
from pathlib import Path

import pytest

from shardlab.autograder.sandbox import staging
from shardlab.autograder.core.errors import EXIT_REFUSED, ShardlabError
from shardlab.autograder.course_file import SHIPPED_NOTE
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.autograder.engine.submission import open_submission
from helpers import run_cli

pytestmark = pytest.mark.sandbox

SECRET = "root-only secret: the answer key is 42"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A file outside the submission, standing for a root-only file."""
    path = tmp_path / "root-only" / "secret.txt"
    path.parent.mkdir()
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


def _folder(tmp_path: Path) -> Path:
    """An honest folder submission (the solutions) to be spoilt by an attack."""
    root = tmp_path / "submission"
    shutil.copytree(SOLUTIONS, root / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    return root


# ---- the attacks: each spoils a folder and says which path must be named ----

def symlink_to_outside_file(root, outside):
    (root / "assignments" / "memory.py").unlink()
    (root / "assignments" / "memory.py").symlink_to(outside)
    return "assignments/memory.py"


def symlink_to_the_answer_key(root, outside):
    (root / "assignments" / "fsdp.py").unlink()
    (root / "assignments" / "fsdp.py").symlink_to(SOLUTIONS / "fsdp.py")
    return "assignments/fsdp.py"


def symlinked_assignments_folder(root, outside):
    shutil.rmtree(root / "assignments")
    (root / "assignments").symlink_to(SOLUTIONS, target_is_directory=True)
    return "assignments"


def deep_symlink(root, outside):
    deep = root / "assignments" / "data" / "more"
    deep.mkdir(parents=True)
    (deep / "notes.txt").symlink_to(outside)
    return "assignments/data/more/notes.txt"


def dangling_symlink(root, outside):
    (root / "assignments" / "cache").symlink_to("/root/.cache/shardlab")
    return "assignments/cache"


def hard_link_to_outside_file(root, outside):
    (root / "assignments" / "memory.py").unlink()
    os.link(outside, root / "assignments" / "memory.py")
    return "assignments/memory.py"


def fifo(root, outside):
    (root / "assignments" / "memory.py").unlink()
    os.mkfifo(root / "assignments" / "memory.py")       # reading it would block forever
    return "assignments/memory.py"


def unix_socket(root, outside):
    here = os.getcwd()
    os.chdir(root / "assignments")                       # socket paths are short: bind a relative one
    try:
        sock = socket.socket(socket.AF_UNIX)
        sock.bind("grader.sock")
        sock.close()
    finally:
        os.chdir(here)
    return "assignments/grader.sock"


def git_checkout_with_link(root, outside):
    """A git checkout: .git/ beside assignments/, and a link inside
    assignments/ into the checkout's own .git (or anywhere else)."""
    git = root / ".git"
    (git / "objects").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "config").write_text("[core]\n\trepositoryformatversion = 0\n")
    (root / "assignments" / "comm4d.py").unlink()
    (root / "assignments" / "comm4d.py").symlink_to(Path("..") / ".git" / "config")
    (root / "assignments" / "buckets.py").unlink()
    (root / "assignments" / "buckets.py").symlink_to(outside)
    return "assignments/buckets.py"    # the first offender in name order


FOLDER_ATTACKS = [symlink_to_outside_file, symlink_to_the_answer_key, symlinked_assignments_folder,
                  deep_symlink, dangling_symlink, hard_link_to_outside_file, fifo, unix_socket,
                  git_checkout_with_link]


def _zip_with(tmp_path: Path, name: str, mode: int, data: str) -> Path:
    """A zip holding the solutions plus one member whose Unix mode is `mode`."""
    path = tmp_path / "upload.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for f in sorted(SOLUTIONS.glob("*.py")):
            if f"assignments/{f.name}" != name:
                zf.write(f, f"assignments/{f.name}")
        member = zipfile.ZipInfo(name)
        member.external_attr = mode << 16
        zf.writestr(member, data)
    return path


def zip_with_symlink(tmp_path, outside):
    return _zip_with(tmp_path, "assignments/memory.py", stat.S_IFLNK | 0o777, str(outside)), \
        "assignments/memory.py"


def zip_with_fifo(tmp_path, outside):
    return _zip_with(tmp_path, "assignments/pipe", stat.S_IFIFO | 0o644, ""), "assignments/pipe"


def zip_with_device(tmp_path, outside):
    return _zip_with(tmp_path, "assignments/disk", stat.S_IFBLK | 0o644, ""), "assignments/disk"


ZIP_ATTACKS = [zip_with_symlink, zip_with_fifo, zip_with_device]


def _one_line_naming(message: str, path: str) -> None:
    assert "\n" not in message.strip() and path in message, message
    assert SECRET not in message


@pytest.mark.parametrize("attack", FOLDER_ATTACKS, ids=lambda a: a.__name__)
def test_stage_refuses(attack, tmp_path, outside):
    root = _folder(tmp_path)
    offender = attack(root, outside)
    into = tmp_path / "staged"
    with pytest.raises(ShardlabError) as refused:
        staging.stage(root, into)
    _one_line_naming(str(refused.value), offender)
    copied = [p for p in into.rglob("*")] if into.exists() else []
    assert not any(p.is_file() and SECRET in p.read_text(errors="replace") for p in copied)


@pytest.mark.parametrize("attack", FOLDER_ATTACKS, ids=lambda a: a.__name__)
def test_shardlab_grade_refuses_folder(attack, tmp_path, outside):
    root = _folder(tmp_path)
    offender = attack(root, outside)
    _assert_graded_zero_naming(run_cli("grade", str(root), "--json", timeout=120), offender)


@pytest.mark.parametrize("attack", ZIP_ATTACKS, ids=lambda a: a.__name__)
def test_shardlab_grade_refuses_zip(attack, tmp_path, outside):
    upload, offender = attack(tmp_path, outside)
    _assert_graded_zero_naming(run_cli("grade", str(upload), "--json", timeout=120), offender)


def _assert_graded_zero_naming(done, offender: str) -> None:
    """`shardlab grade --json` on a refused upload: exit 4 (`errors.EXIT_REFUSED`), a report of 0 whose
    one sentence names the offending path, as on Gradescope; no traceback, nothing on stderr but the
    note that the shipped course is used."""
    assert done.returncode == EXIT_REFUSED, (done.stdout, done.stderr)
    assert done.stderr.removeprefix(SHIPPED_NOTE + "\n") == "" and "Traceback" not in done.stdout
    report = json.loads(done.stdout)
    assert report["score"] == 0 and report["max_score"] > 0
    assert report["no_submission"].startswith("submission refused: ")
    _one_line_naming(report["no_submission"], offender)
    assert SECRET not in done.stdout


@pytest.mark.parametrize("attack", ZIP_ATTACKS, ids=lambda a: a.__name__)
def test_open_submission_refuses_zip(attack, tmp_path, outside):
    upload, offender = attack(tmp_path, outside)
    with pytest.raises(ShardlabError) as refused:
        with open_submission(upload):
            pass
    _one_line_naming(str(refused.value), offender)


def test_open_submission_yields_a_link_free_copy(tmp_path, outside):
    """Everything downstream (sandbox, gloo ranks, answers.toml) reads the
    staged copy, never the upload."""
    root = _folder(tmp_path)
    (root / "answers.toml").write_text("student_id = 's001'\n")
    with open_submission(root) as staged:
        assert staged != root
        assert (staged / "assignments" / "memory.py").read_text() == (SOLUTIONS / "memory.py").read_text()
        assert (staged / "answers.toml").read_text() == "student_id = 's001'\n"
    (root / "answers.toml").unlink()
    (root / "answers.toml").symlink_to(outside)
    with pytest.raises(ShardlabError) as refused:
        with open_submission(root):
            pass
    _one_line_naming(str(refused.value), "answers.toml")


def test_a_symlinked_subfolder_is_not_a_candidate(tmp_path):
    """`find_assignments` looks one folder down for assignments/; a link there must
    not lead it elsewhere (e.g. to the repo, which holds assignments/)."""
    upload = tmp_path / "upload"
    upload.mkdir()
    (upload / "work").symlink_to(SOLUTIONS.parent, target_is_directory=True)
    with pytest.raises(ShardlabError) as refused:
        with open_submission(upload):
            pass
    assert "holds no assignments/ folder" in str(refused.value)


def test_gradescope_upload_links_lead_nowhere(tmp_path, outside):
    """On Gradescope the upload arrives unpacked; otter_runtime looks for
    assignments/ two levels down and for a lone zip. A linked subfolder (to
    the repo, which holds assignments/) or a linked zip is not followed, and
    a linked assignments/ is refused by name when graded."""
    from shardlab.autograder.platforms import otter as otter_runtime
    upload = tmp_path / "upload"
    (upload / "work").mkdir(parents=True)
    (upload / "work" / "repo").symlink_to(SOLUTIONS.parent, target_is_directory=True)
    assert otter_runtime.find_upload(upload) is None
    zipped = shutil.make_archive(str(tmp_path / "honest"), "zip", _folder(tmp_path))
    (upload / "work.zip").symlink_to(zipped)
    assert otter_runtime.find_upload(upload) is None
    (upload / "assignments").symlink_to(SOLUTIONS, target_is_directory=True)
    root = otter_runtime.find_upload(upload)
    with pytest.raises(ShardlabError) as refused:
        with open_submission(root):
            pass
    _one_line_naming(str(refused.value), "assignments")


# ---- what an honest submission gets ----------------------------------------

def test_stage_copies_plain_files_readable_by_the_sandbox(tmp_path):
    root = _folder(tmp_path)
    (root / "assignments" / "__pycache__").mkdir()
    (root / "assignments" / "__pycache__" / "memory.cpython-311.pyc").write_bytes(b"\0")
    (root / "assignments" / "notes").mkdir(mode=0o700)
    (root / "assignments" / "notes" / "todo.md").write_text("x")
    (root / "assignments" / "notes" / "todo.md").chmod(0o600)
    into = tmp_path / "staged"
    assert staging.stage(root, into) == into
    staged = into / "assignments"
    assert sorted(p.name for p in staged.iterdir()) == sorted(
        p.name for p in (root / "assignments").iterdir() if p.name != "__pycache__")
    assert (staged / "fsdp.py").read_bytes() == (SOLUTIONS / "fsdp.py").read_bytes()
    assert stat.S_IMODE(os.stat(staged / "notes").st_mode) == 0o755
    assert stat.S_IMODE(os.stat(staged / "notes" / "todo.md").st_mode) == 0o644
    assert stat.S_IMODE(os.stat(into).st_mode) == 0o755


def test_stage_caps_files_bytes_and_depth(tmp_path, monkeypatch):
    root = _folder(tmp_path)
    monkeypatch.setattr(staging, "MAX_FILES", 3)
    with pytest.raises(ShardlabError, match="more than 3 files"):
        staging.stage(root, tmp_path / "a")
    monkeypatch.undo()
    monkeypatch.setattr(staging, "MAX_BYTES", 1000)
    with pytest.raises(ShardlabError, match="more than"):
        staging.stage(root, tmp_path / "b")
    monkeypatch.undo()
    deep = root / "assignments"
    for _ in range(staging.MAX_DEPTH + 1):
        deep = deep / "d"
    deep.mkdir(parents=True)
    with pytest.raises(ShardlabError, match="nested deeper"):
        staging.stage(root, tmp_path / "c")


def test_a_file_swapped_for_a_link_after_the_check_is_refused(tmp_path, outside, monkeypatch):
    """The race: the type check passes on a plain file, then the student
    swaps it for a symlink before the copy opens it. The copy opens without
    following links, so it fails instead of reading the link's target."""
    root = _folder(tmp_path)
    victim = root / "assignments" / "memory.py"
    real_lstat = staging._lstat

    def lstat_then_swap(name, dir_fd):
        st = real_lstat(name, dir_fd)
        if name == "memory.py":
            swap = victim.with_name(".swap")
            swap.symlink_to(outside)
            os.replace(swap, victim)
        return st

    monkeypatch.setattr(staging, "_lstat", lstat_then_swap)
    with pytest.raises(ShardlabError) as refused:
        staging.stage(root, tmp_path / "staged")
    _one_line_naming(str(refused.value), "assignments/memory.py")


def test_path_names_are_shown_safely(tmp_path, outside):
    """A file name is student text too: no newline or terminal escape in the error."""
    root = _folder(tmp_path)
    (root / "assignments" / "evil\n\x1b[2Jname").symlink_to(outside)
    with pytest.raises(ShardlabError) as refused:
        staging.stage(root, tmp_path / "staged")
    message = str(refused.value)
    assert "\n" not in message and "\x1b" not in message and "assignments/evil" in message
