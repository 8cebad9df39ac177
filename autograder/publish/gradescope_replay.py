"""The autograder zip run the way Gradescope runs it, on this machine, as far
as a machine without Docker can (needs root and util-linux's `unshare`).

Gradescope (docs/gradescope.md, research notes §1, §5, §6) builds an image once
per zip: the zip unpacked into /autograder/source, then `setup.sh`. Each
submission then runs in a fresh container of that image: the upload unpacked
into /autograder/submission, submission_metadata.json beside it, and
/autograder/run_autograder (a copy of the zip's) started in /autograder; the
grade is whatever /autograder/results/results.json says.

Here:
- the *environment* is a scratch venv standing in for otter's conda env: it
  gets this project's installed packages (hard links, so it costs seconds)
  except shardlab itself, and then the zip's own pip lines from
  environment.yml install the zip's shardlab wheel into it, so grading runs
  the wheel Gradescope would run, without solutions/ or tests/;
- the *image* is a folder: the zip unpacked and set up by the part of the
  zip's setup.sh that follows SETUP_TAIL_MARK (permissions, `shardlab walls`,
  `shardlab warm`), run verbatim with `mamba run -n otter-env` meaning "in the
  scratch venv"; what comes before it (apt, Miniforge, conda) needs the
  network or conda and is only simulated (`apt-get install -s`);
- each *run* happens in a private mount namespace with a fresh tmpfs at
  /autograder, the image copied in, a fresh HOME, and the zip's own
  run_autograder with its three conda-activation lines replaced by the
  scratch venv on PATH (a run fails loudly if those lines change upstream).

What only a real upload can confirm: conda and the Miniforge download, the
image build itself, whether Gradescope's container allows the jail's
namespaces and cgroups (README, Gradescope section).
"""
from __future__ import annotations

import html as _html
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from shardlab.autograder.platforms.process_memory import PeakSampler
from shardlab.autograder.core.errors import CheckFailed, ShardlabError
from shardlab.autograder.core.results import points_text
from shardlab.autograder.sandbox.untrusted import one_line
from shardlab.autograder.sandbox.jail import Cgroup
from shardlab.autograder.platforms.otter import GRADING_PID_FILE, KERNEL_UP_FILE, REPORT_FILE
from shardlab.autograder.publish.otter_export import AUTOGRADER_DIR, CACHE_DIR, OTTER_ENV_NAME, SETUP_TAIL_MARK

CONDA_LINES = ("export PATH=/root/miniforge3/bin:", 'eval "$(mamba shell hook', f"mamba activate {OTTER_ENV_NAME}")
# `mamba run -n otter-env CMD...` in setup.sh: CMD in the scratch venv (its bin/ is first on PATH)
MAMBA_SHIM = f'mamba() {{ if [ "$1 $2 $3" = "run -n {OTTER_ENV_NAME}" ]; then shift 3; "$@"; else return 97; fi; }}'
RUN_TIMEOUT_SECONDS = 600
REPLAY_MEMORY_BYTES = 16 * 2**30     # bounds of a replayed run's cgroup: far above one grading
REPLAY_PIDS = 32768          # Gradescope's default limit is 10 minutes; otter run has none
# the files whose modification times mark a run's milestones (`Run.stamps`), under /autograder
STAMP_FILES = {"grading started": GRADING_PID_FILE, "kernel up": KERNEL_UP_FILE, "report written": REPORT_FILE,
               "otter's results": Path("results") / "results.pkl", "results final": Path("results") / "results.json"}


@dataclass
class Run:
    """One replayed grading run."""

    results: dict | None           # results.json, None when the run wrote none
    log: str                       # run_autograder's stdout and stderr
    seconds: float
    peak_cgroup_bytes: int | None  # the run's cgroup memory peak (page cache included), where measurable
    peak_pss_bytes: int            # the largest sum of PSS over the run's processes, sampled every 20 ms
    cache_after: list[str]         # the files of the image's shardlab cache when the run ended
    stamps: dict[str, float] | None = None   # STAMP_FILES' milestone -> seconds after the run started


def _namespace(script: str, env: dict[str, str], timeout: float, cgroup: Cgroup | None = None):
    """Run bash `script` in a private mount namespace (the tmpfs at /autograder is its own)."""
    check_can_replay()
    os.makedirs("/autograder", exist_ok=True)       # the mount point only; the tmpfs is private
    cmd = ["unshare", "--mount", "--propagation", "private", "bash", "-c", script]

    def enter_cgroup():
        assert cgroup is not None                   # the pre-exec function only when there is one
        cgroup.add(os.getpid())
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=enter_cgroup if cgroup else None, start_new_session=True)


def _finish(proc, timeout: float) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, _ = proc.communicate()
        out += f"\n[replay: killed after {timeout:g} s]"
    return out


def run_autograder_here(text: str, venv: Path) -> str:
    """The zip's run_autograder with its conda activation replaced by `venv` on PATH."""
    lines = text.splitlines()
    conda = [line for line in lines if line.startswith(CONDA_LINES)]
    if len(conda) != 3:
        raise ShardlabError(f"otter's run_autograder changed; update CONDA_LINES: {lines}")
    out = [line for line in lines if line not in conda]
    out.insert(1, f"export PATH={venv}/bin:$PATH   # replay: the scratch venv stands in for {OTTER_ENV_NAME}")
    return "\n".join(out) + "\n"


def setup_tail(setup_sh: str) -> str:
    """The part of the zip's setup.sh that runs in the env (after SETUP_TAIL_MARK)."""
    head, mark, tail = setup_sh.partition(SETUP_TAIL_MARK)
    if not mark:
        raise ShardlabError("the zip's setup.sh has no shardlab tail mark")
    return tail


def apt_packages(setup_sh: str) -> list[str]:
    """The packages of setup.sh's `apt-get install` lines."""
    pkgs = []
    for line in setup_sh.splitlines():
        if not line.startswith("apt-get install"):
            continue
        words = shlex.split(line, comments=True)
        if words[:2] == ["apt-get", "install"]:
            pkgs += [w for w in words[2:] if not w.startswith("-")]
    return pkgs


def pip_lines(environment_yml: str) -> list[str]:
    """The pip section of the zip's environment.yml, as pip arguments."""
    import yaml
    deps = yaml.safe_load(environment_yml)["dependencies"]
    lines = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    return [word for line in lines for word in shlex.split(line)]


def make_env(where: Path) -> Path:
    """A scratch venv holding this project's installed packages except shardlab
    (hard links into its site-packages), for the zip's pip lines to complete."""
    project_site = Path(next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()))
    venv = where / "otter-env"
    # ignore: the base interpreter is a private attribute of CPython's sys, which typeshed does not declare
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)  # type: ignore[attr-defined]
    site = venv / "lib" / project_site.parent.name / "site-packages"
    grader = [e for e in os.listdir(project_site) if "shardlab" in e.lower() or e.startswith("__editable__")]
    for entry in sorted(set(os.listdir(project_site)) - set(grader)):
        src, dst = project_site / entry, site / entry
        if src.is_dir() and not src.is_symlink():
            done = subprocess.run(["cp", "-al", str(src), str(dst)], capture_output=True, text=True)
            if done.returncode != 0:          # another file system: copy
                shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
        else:
            try:
                os.link(src, dst, follow_symlinks=False)
            except OSError:
                shutil.copy2(src, dst, follow_symlinks=False)
    return venv


def _script_env(home: Path) -> dict[str, str]:
    """Gradescope's bare environment; a smaller pool of data seed keys passes through when the
    caller set one (the project's tests do, for time: `shardlab warm` fills every key's cache)."""
    from shardlab.autograder.sandbox.gloo.seeds import POOL_SIZE_ENV
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": str(home),
           "LANG": "C.UTF-8"}
    if os.environ.get(POOL_SIZE_ENV):
        env[POOL_SIZE_ENV] = os.environ[POOL_SIZE_ENV]
    return env


def build_image(autograder_zip: Path, venv: Path, image: Path, work: Path,
                config_text: str | None = None, hide_cgroups: bool = False) -> tuple[int, str]:
    """Gradescope's image build, replayed: unpack the zip into a fresh
    /autograder/source, install environment.yml's pip lines into `venv`,
    run setup.sh's shardlab tail, and keep /autograder/source as `image`.
    `config_text` replaces the shipped course config (same zip, other
    course); `hide_cgroups` mounts an empty /sys/fs/cgroup (a machine
    without per-sandbox cgroups). Returns (setup's exit status, its output)."""
    with zipfile.ZipFile(autograder_zip) as zf:
        setup_sh = zf.read("setup.sh").decode()
        pips = pip_lines(zf.read("environment.yml").decode())
    work.mkdir(parents=True, exist_ok=True)
    (work / "tail.sh").write_text("set -euo pipefail\n" + MAMBA_SHIM + "\n" + setup_tail(setup_sh))
    if config_text is not None:
        (work / "config.toml").write_text(config_text)
    home = work / "home"
    home.mkdir(exist_ok=True)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--quiet",
           "--no-input", "--retries", "0", "--timeout", "10", *pips]
    script = f"""set -e
mount -t tmpfs -o size=4g tmpfs /autograder
mkdir -p /autograder/source /autograder/submission /autograder/results
cd /autograder/source && {shlex.quote(sys.executable)} -m zipfile -e {shlex.quote(str(autograder_zip))} .
{f"cp {work}/config.toml /autograder/source/shardlab-course.toml" if config_text is not None else ""}
{"mount -t tmpfs tmpfs /sys/fs/cgroup" if hide_cgroups else ""}
{shlex.join(pip)}
export PATH={venv}/bin:$PATH
cd /autograder/source
status=0; bash {work}/tail.sh || status=$?
rm -rf {image} && cp -a /autograder/source {image}
exit $status
"""
    proc = _namespace(script, _script_env(home), RUN_TIMEOUT_SECONDS)
    log = _finish(proc, RUN_TIMEOUT_SECONDS)
    return proc.returncode, log


def _run_cgroup(cpus: float | None) -> Cgroup | None:
    """The sandbox's own cgroup mechanism (`jail.Cgroup`) for one run: its
    memory peak is read afterwards; with `cpus`, a CPU quota like Gradescope's
    (1/2 vCPU by default). The memory and process bounds only keep a runaway
    replay from taking the machine; a grading run stays far below them."""
    group = Cgroup.create(REPLAY_MEMORY_BYTES, pids=REPLAY_PIDS, cpus=cpus)
    if cpus is not None and not (group and {"cpu", "unified"} & set(group.dirs)):
        if group:
            group.remove()
        raise ShardlabError("no cpu cgroup here to limit a replayed run's CPUs")
    return group


def replay(image: Path, venv: Path, upload: Path, metadata: dict, work: Path, cpus: float | None = None) -> Run:
    """One grading run of `upload` (a folder, as Gradescope unpacks it) in a
    fresh container of `image`, on `cpus` CPUs (a cgroup quota; None: this
    machine's); results.json and what the run cost."""
    work.mkdir(parents=True, exist_ok=True)
    with open(image / "run_autograder") as f:
        (work / "run_autograder").write_text(run_autograder_here(f.read(), venv))
    (work / "submission_metadata.json").write_text(json.dumps(metadata))
    home = work / "home"
    home.mkdir(exist_ok=True)
    stamp_paths = shlex.join(str(path) for path in STAMP_FILES.values())
    script = f"""set -e
mount -t tmpfs -o size=2g tmpfs /autograder
cp -a {image} /autograder/source
cp -a {upload} /autograder/submission
mkdir -p /autograder/results
cp {work}/submission_metadata.json /autograder/
cp {work}/run_autograder /autograder/run_autograder
cd /autograder && bash /autograder/run_autograder || true
cp /autograder/results/results.json {work}/results.json 2>/dev/null || true
ls -A {CACHE_DIR} > {work}/cache-after.txt 2>/dev/null || true
cd {AUTOGRADER_DIR} && stat -c '%.9Y %n' {stamp_paths} > {work}/stamps.txt 2>/dev/null || true
"""
    (work / "results.json").unlink(missing_ok=True)
    (work / "stamps.txt").unlink(missing_ok=True)
    cgroup = _run_cgroup(cpus)
    started_at = time.time()            # the files' clock, for the stamps
    start = time.monotonic()
    proc = _namespace(script, _script_env(home), RUN_TIMEOUT_SECONDS, cgroup)
    sampler = PeakSampler().start(proc.pid)
    try:
        log = _finish(proc, RUN_TIMEOUT_SECONDS)
    finally:
        sampler.stop()
    seconds = time.monotonic() - start
    peak_cgroup = cgroup.memory_peak() if cgroup else None
    if cgroup:
        cgroup.kill()
        cgroup.remove()
    path = work / "results.json"
    results = json.loads(path.read_text()) if path.is_file() else None
    listing = work / "cache-after.txt"
    cache_after = listing.read_text().split() if listing.is_file() else []
    return Run(results, log, seconds, peak_cgroup, sampler.peak_bytes, cache_after,
               _stamps(work / "stamps.txt", started_at))


def _stamps(listing: Path, started_at: float) -> dict[str, float]:
    """STAMP_FILES' milestones found in `listing` (`stat -c '%.9Y %n'`, paths relative to
    /autograder), as seconds after `started_at`; a file the run did not write is left out."""
    names = {str(path): name for name, path in STAMP_FILES.items()}
    out = {}
    if listing.is_file():
        for line in listing.read_text().splitlines():
            mtime, _, path = line.partition(" ")
            if path in names:
                out[names[path]] = float(mtime) - started_at
    return out


def gradescope_metadata(users: list[dict], submission_method: str = "upload") -> dict:
    """submission_metadata.json in Gradescope's documented shape
    (https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/)."""
    return {"id": 123456, "created_at": "2026-11-22T10:00:00.000000-08:00",
            "assignment": {"due_date": "2026-12-01T23:59:00.000000-08:00", "group_size": 2,
                           "group_submission": len(users) > 1, "id": 25828, "course_id": 1234,
                           "late_due_date": None, "release_date": "2026-11-01T00:00:00.000000-07:00",
                           "title": "Assignment 2", "total_points": "57.0"},
            "submission_method": submission_method, "users": users, "previous_submissions": []}


def unpack_upload(upload_zip: Path, into: Path) -> Path:
    """Gradescope unpacks an uploaded zip into the submission folder."""
    into.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(upload_zip) as zf:
        zf.extractall(into)
    return into


def scratch(prefix: str = "shardlab-replay-") -> Path:
    """A fresh temporary folder (tempfile's: $TMPDIR, else /tmp), never inside the checkout.
    `make_env` hard-links the project's packages into it where it shares their file system,
    and copies them where it does not (slower: point TMPDIR at the venv's file system then)."""
    return Path(tempfile.mkdtemp(prefix=prefix))


def check_can_replay() -> None:
    """A private /autograder needs root and util-linux's unshare: one line before any work."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise ShardlabError("replaying Gradescope needs root and unshare(1) (util-linux): run it with sudo")


def upload_folder(upload: Path, into: Path) -> Path:
    """The submission folder Gradescope makes of an upload: a zip unpacked into it, a folder as it is."""
    if upload.is_dir():
        shutil.copytree(upload, into, symlinks=True)
        return into
    if not zipfile.is_zipfile(upload):
        raise ShardlabError(f"not a submission: {upload} is neither a folder nor a zip file")
    return unpack_upload(upload, into)


def replay_zip(autograder_zip: Path, uploads: list[Path], work: Path, metadata: dict,
               on_built=None) -> Iterator[tuple[Path, Run]]:
    """Gradescope's life of `autograder_zip`, replayed in `work`: the image built once
    (`build_image`; a failed build raises ShardlabError with the end of its log), then
    each upload graded in a fresh container of it (`replay`), yielded as it is done.
    `on_built(log)` is called once the image is ready."""
    venv = make_env(work)
    status, log = build_image(autograder_zip, venv, work / "image", work / "build")
    (work / "build.log").write_text(log)
    if status != 0:
        tail = "; ".join(line for line in log.strip().splitlines()[-3:])
        raise CheckFailed(f"the image build (setup.sh) failed with status {status}: {one_line(tail, 400)} "
                          f"(the whole log: {work / 'build.log'})")
    if on_built is not None:
        on_built(log)
    for k, upload in enumerate(uploads):
        run_dir = work / f"run-{k}"
        folder = upload_folder(upload, run_dir / "upload")
        run = replay(work / "image", venv, folder, metadata, run_dir)
        (run_dir / "run_autograder.log").write_text(run.log)
        yield upload, run


def replay_lines(results: dict) -> list[str]:
    """results.json as a student sees it on Gradescope, as printable lines: the total
    over the autograder's points, then each test's name, score, visibility and output,
    and the top-level output. An output is shown as text (simple_format is HTML with
    its line breaks kept: entities decoded), each line made one printable line
    (`untrusted.one_line`: it may carry the student's text)."""
    tests = results.get("tests", [])
    scored = [t for t in tests if "score" in t]
    total = results.get("score", sum(float(t["score"]) for t in scored))
    maximum = sum(float(t.get("max_score", 0)) for t in scored)
    lines = [f"  total {points_text(float(total))} / {points_text(maximum)}"]

    def shown(output) -> list[str]:
        return [f"      {one_line(line, 2000)}" for line in _html.unescape(str(output or "")).splitlines()]
    for t in tests:
        points = (f" ({points_text(float(t['score']))} / {points_text(float(t.get('max_score', 0)))})"
                  if "score" in t else "")
        lines.append(f"  {one_line(str(t.get('name', '(unnamed test)')))}{points} [{t.get('visibility', 'visible')}]")
        lines += shown(t.get("output"))
    if results.get("output"):
        lines += ["  top-level output:", *shown(results["output"])]
    return lines
