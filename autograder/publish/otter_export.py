"""The otter-grader autograder zip for Gradescope (`shardlab build` writes it).

Pipeline, in order:
1. one exception-based test file per question (`OK_FORMAT = False`), one
   test case per case group of each auto-graded part with the group's share
   of its points; each case only asks the engine (`platforms.otter`, which grades the submission once);
2. the entry file, shipped in otter's `files/` so otter copies it into every
   submission as its one top-level `.py` file;
3. a shardlab wheel built from this tree (no network, no build isolation),
   without `solutions/` or `tests/`: the answer key never travels to
   Gradescope, and nothing at grading time imports it;
4. `otter generate` writes the zip (run_autograder, setup.sh, environment.yml
   with our requirements as the whole pip list, otter among them without its
   plugins' packages: `overwrite_requirements`, no text edited; otter_config.json,
   tests/, files/); two of its files are replaced by shardlab's, rendered
   from templates/gradescope/ (otter 7 has no option or hook for either):
   - setup.sh (`setup_script`): Miniforge and the env, no browser, no PDF
     toolchain, and a guard that refuses `otter grade` in one line; once
     the wheel is installed, the installed `reference/` package, the wheel
     and the course config (with its secret) are made unreadable by anyone
     but root (the student's uid in the jail must not read them even if it
     saw them), `shardlab walls` probes the jail's walls while the image is
     built, printing the level, each missing wall and its remedy in the
     build log, and failing the build when they are below the course's
     `[grading] require_walls` (`sandbox.walls`), and `shardlab warm`
     computes every cached expected value into the image (CACHE_DIR);
   - run_autograder (`run_autograder_script`): otter's own, every line in
     order (the build checks), with shardlab's steps around otter's line:
     the cache folder is set, and the upload is moved out of otter's
     submission folder before otter looks for the file to grade (otter
     looks before any plugin runs), so otter only ever finds the entry
     file, whatever the upload holds (a notebook, other `.py` files,
     `__MACOSX/`, a GitHub checkout); just before otter's own line, the
     grading starts in the background, so it runs while otter starts (the
     kernel's cases wait for its report: `platforms.otter.grade_before_otter`);
     after it, the finalize step;
5. the wheel, the course config, the course's own question folders
   (`[course] question_dirs`, at their place relative to the config; their
   definition, reference, scenario and checks, never their solution) and
   (with `--roster`) the roster map are appended at the zip's root, i.e.
   `/autograder/source/` on Gradescope.

Visibility: an otter case is public when its case group has at least one
public case (its feedback already withholds hidden inputs and expected
values); a group whose cases are all hidden becomes a hidden otter case. Manual parts
(question 3 (d)) have no otter case: add them as a manual question in the
Gradescope outline. Bonus parts are ordinary cases: otter's maximum counts
their points, shardlab's `max_score` does not; run_autograder's finalize step rewrites each
question's maximum in results.json to shardlab's
(`otter.finalize_results`), and `shardlab build` prints `gradescope_points(cfg)`
for the outline, so a bonus earned is extra credit.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from shardlab.autograder.core import content, course_folders
from shardlab.autograder.engine.answer_sheet import ROSTER_FILE, SHEET_TITLE, sheet_parts
from shardlab.autograder.engine.plan import case_groups, group_points, part_cases
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.platforms.otter import (CONFIG_FILE, ENTRY_FILE, GRADING_LOG, GRADING_PID_FILE, QUARANTINE,
                                                 question_file_title)
from shardlab.autograder.core.results import points_text
from shardlab.autograder.questions import hand_graded, part_points, questions
from shardlab.reference.cache import CACHE_ENV

REPO = content.ROOT
PYTHON_VERSION = "3.11"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
AUTOGRADER_DIR = "/autograder"          # otter's default autograder_dir (Gradescope's)
OTTER_ENV_NAME = "otter-env"            # the conda env otter's setup.sh creates
OTTER_CONFIG = {
    "lang": "python",
    "plugins": ["shardlab.autograder.platforms.otter_plugin.QuarantinePlugin"],
    "show_hidden": True,            # hidden cases' results after grades are published
    "show_all_public": True,        # all cases public: every result shows at once
    "show_stdout": False,
    "pdf": False,
    "force_public_test_summary": False,   # each case once, under its question, not again in a summary
}

CACHE_DIR = f"{AUTOGRADER_DIR}/source/shardlab-cache"   # in the image: filled by setup, read by every run
# the env's otter: the release that wrote the zip, without the Google Sheets plugins' packages (otter's
# own environment.yml line adds `plugins`; `overwrite_requirements` makes requirements.txt the whole list)
OTTER_REQUIREMENT = "otter-grader[grading]"
OTTER_GRADE_REFUSAL = ("shardlab: this zip is for Gradescope; 'otter grade' cannot build it (its image gets only "
                       "setup.sh, environment.yml and requirements.* before set-up). Grade locally with: "
                       "shardlab grade SUBMISSIONS... --jobs 2 --out DIR")
SETUP_TAIL_MARK = "# ---- shardlab: the env exists; secure, probe and warm the grader ----"

# the installed package (-I: never a `reference/` folder in the working directory)
_REFERENCE_DIR = "import os, shardlab.reference as r; print(os.path.dirname(r.__file__))"
WHEEL_PACKAGES = ("reference", "autograder", "assignments", "templates")   # never solutions/, tests/


# otter's own line in run_autograder, after the env's activation: the grading starts just before it
OTTER_RUN_LINE = f"python {AUTOGRADER_DIR}/source/run_otter.py"


def _render(name: str, **extra) -> str:
    """templates/gradescope/<name>.j2 (the project's one Jinja environment, `publish.jinja`) with otter's
    names for its folder and env and shardlab's for its files."""
    from otter.generate import MINIFORGE_VERSION

    from shardlab.autograder.publish.jinja import environment
    return environment().get_template(f"gradescope/{name}.j2").render(
        autograder_dir=AUTOGRADER_DIR, source=f"{AUTOGRADER_DIR}/source", otter_env_name=OTTER_ENV_NAME,
        miniforge_version=MINIFORGE_VERSION, config_file=CONFIG_FILE, roster_file=ROSTER_FILE,
        cache_env=CACHE_ENV, cache_dir=CACHE_DIR, quarantine=QUARANTINE, grading_log=GRADING_LOG,
        grading_pid_file=GRADING_PID_FILE, grading_pid_dir=GRADING_PID_FILE.parent,
        tail_mark=SETUP_TAIL_MARK, otter_grade_refusal=OTTER_GRADE_REFUSAL, reference_dir_code=_REFERENCE_DIR,
        **extra)


def setup_script(own_dirs: tuple[str, ...] = ()) -> str:
    """The image's setup.sh (templates/gradescope/setup.sh.j2, which says why it is not otter's):
    Miniforge and the env otter's run_autograder activates, then shardlab's steps: the answer
    key's files become root's alone, `shardlab walls` fails the build when the walls are below the
    course's `[grading] require_walls`, and `shardlab warm` fills the cache every run then starts
    from. The jail needs nothing from apt (it works through system calls; its system-call filter
    uses libseccomp2, which apt itself depends on). `own_dirs`: the course's question folders beside
    its config (`own_question_files`), root's alone as the installed reference is."""
    return _render("setup.sh", private_dirs="".join(f" {AUTOGRADER_DIR}/source/{d}" for d in own_dirs))


def run_autograder_script(otters: str) -> str:
    """The zip's run_autograder (templates/gradescope/run_autograder.j2): otter's own `otters`,
    every line of it in order, with shardlab's steps around otter's: the cache folder set and the
    upload moved aside before otter looks for the file it grades (otter 7 looks before any plugin
    runs), the grading started in the background just before otter's own line, and the finalize
    step after it. An otter whose run_autograder has a line ours lacks is a one-line error."""
    ours = _render("run_autograder")
    kept = iter(ours.splitlines())
    missing = [line for line in otters.splitlines()[1:] if line.strip() and line not in kept]
    if missing:
        raise ShardlabError(f"otter's run_autograder has lines templates/gradescope/run_autograder.j2 lacks "
                            f"(a new otter version?): {missing[:3]}")
    return ours


ENTRY_SOURCE = '''\
"""shardlab's otter entry file: it only locates the submission.

The autograder zip ships this file and otter copies it into every submission;
student code is never imported here. The test cases grade the submission with
the shardlab engine, which runs student code in its own sandbox.
"""
from shardlab.autograder.platforms.otter import locate_submission

shardlab_submission = locate_submission()
'''


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


@dataclass(frozen=True)
class OtterCase:
    """One otter test case: it passes when the shardlab report's part `id`
    earned its points, or with `group`, that case group's share of them."""

    id: str
    title: str
    points: float
    hidden: bool        # hidden on Gradescope until grades are published
    group: int | None = None


def is_hidden(cases) -> bool:
    """A part (or case group) is a hidden otter case only when none of its cases is public."""
    return not any(c.public for c in cases)


def question_cases(question, cfg) -> list[OtterCase]:
    """One otter case per case group of each auto-graded part, worth the
    group's share of the part's points (`plan.case_groups`)."""
    out = []
    for p in question.parts:
        if p.kind != "auto":
            continue
        cases = part_cases(cfg, p.id)
        groups = case_groups(cases)
        for k, ((name, members), share) in enumerate(zip(groups, group_points(part_points(p, cfg), len(groups)))):
            out.append(OtterCase(p.id, f"{p.title} [{name}]", share, is_hidden([cases[i] for i in members]), k))
    return out


def test_file_source(title: str, cases: list[OtterCase]) -> str | None:
    """The otter test file of one question; None if it has no case."""
    if not cases:
        return None
    lines = [f'"""{title} -- generated by `shardlab build`; do not edit.',
             "", "One test case per case group of each graded part; each asks the shardlab",
             'engine, which grades the whole submission once in its sandbox and keeps the report."""',
             "OK_FORMAT = False", "",
             "from otter.test_files import test_case", "",
             "from shardlab.autograder.platforms.otter import check_part", "",
             f"name = {title!r}", "points = None", ""]
    for n, case in enumerate(cases):
        fn = "part_" + re.sub(r"\W", "_", case.id) + f"_{n}"
        group = "" if case.group is None else f", {case.group}"
        lines += ["",
                  f"@test_case(name={case.id + ' ' + case.title!r}, "
                  f"points={_number(case.points)!r}, hidden={case.hidden})",
                  f"def {fn}(shardlab_submission):",
                  f"    check_part(shardlab_submission, {case.id!r}{group})", ""]
    return "\n".join(lines)


def torch_requirement() -> str:
    """torch as pinned for every environment (content.torch_version), the CPU build."""
    return f"torch=={content.torch_version()}+cpu"


def build_wheel(dest: Path) -> Path:
    """A shardlab wheel from this tree, built in a copy so the tree stays clean."""
    if not (REPO / "pyproject.toml").is_file():
        raise ShardlabError("the autograder zip needs the shardlab source tree (pyproject.toml)")
    with tempfile.TemporaryDirectory(prefix="shardlab-wheel-") as tmp:
        src = Path(tmp) / "src"
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
        src.mkdir()
        for name in ("pyproject.toml", "setup.py", "README.md"):
            shutil.copy(REPO / name, src / name)
        for pkg in WHEEL_PACKAGES:
            shutil.copytree(REPO / pkg, src / pkg, ignore=ignore)
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                               "--no-build-isolation", "-w", str(dest), str(src)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise ShardlabError(f"building the shardlab wheel failed: {proc.stderr.strip()[-800:]}")
    wheels = sorted(dest.glob("shardlab-*.whl"))
    if not wheels:
        raise ShardlabError("building the shardlab wheel produced no wheel")
    return wheels[-1]


def own_question_files(cfg) -> dict[str, Path]:
    """Zip path (beside the course config, as `[course] question_dirs` names them relative to it) ->
    file, for the course's own question folders: what grading needs of each (`course_folders.GRADER_FILES`:
    the definition, the reference, the scenario and checks), never its solution or its wrong submissions.
    A question folder outside the config's folder cannot travel with it: a one-line error."""
    if not cfg.course.question_dirs:
        return {}
    base = Path(cfg.source).resolve().parent
    out = {}
    for folder in course_folders.question_folders(cfg.course.question_dirs):
        try:
            where = folder.path.resolve().relative_to(base)
        except ValueError:
            raise ShardlabError(f"course question {folder.path}: the autograder zip ships question folders beside "
                                f"the course config, so [course] question_dirs must lie inside {base}") from None
        for file in course_folders.GRADER_FILES:
            if folder.file(file).is_file():
                out[f"{where.as_posix()}/{file}"] = folder.file(file)
    return out


def build_autograder(cfg, config_text: str, out: Path, roster_text: str | None = None) -> Path:
    """Write `out/autograder.zip` for this course config; return its path.
    `roster_text`: the roster map the zip carries (`roster.roster_for_zip`)."""
    from otter.generate import main as otter_generate
    from otter.utils import chdir
    out.mkdir(parents=True, exist_ok=True)
    target = (out / "autograder.zip").resolve()
    # visibility needs only the cases, not the (sometimes costly) expected values
    files = {f"q{q.number}": (question_file_title(str(q.number), q.title), question_cases(q, cfg))
             for q in questions(cfg)}
    sheet = sheet_parts(cfg)           # with a course secret: answers.toml, per student variant
    if sheet:
        files["qanswers"] = (question_file_title("answers", SHEET_TITLE),
                             [OtterCase(part_id, title, cfg.course.answer_points, False) for part_id, title in sheet])
    with tempfile.TemporaryDirectory(prefix="shardlab-otter-") as tmp:
        stage = Path(tmp)
        (stage / "tests").mkdir()
        for name, (title, cases) in files.items():
            source = test_file_source(title, cases)
            if source is not None:
                (stage / "tests" / f"{name}.py").write_text(source, encoding="utf-8")
        (stage / ENTRY_FILE).write_text(ENTRY_SOURCE, encoding="utf-8")
        wheel = build_wheel(stage / "wheel")
        from otter import __version__ as otter_version
        (stage / "requirements.txt").write_text("\n".join([
            f"{OTTER_REQUIREMENT}=={otter_version}",
            f"--extra-index-url {TORCH_CPU_INDEX}",
            torch_requirement(),
            f"{AUTOGRADER_DIR}/source/{wheel.name}",
        ]) + "\n")
        (stage / "otter_config.json").write_text(json.dumps(OTTER_CONFIG, indent=2))
        with chdir(stage):
            otter_generate(tests_dir="tests", output_path=str(target), config="otter_config.json",
                           requirements="requirements.txt", overwrite_requirements=True, files=[ENTRY_FILE],
                           python_version=PYTHON_VERSION, no_environment=True)
        own = own_question_files(cfg)
        _add_shardlab_steps(target, tuple(sorted({path.split("/")[0] for path in own})))
        with zipfile.ZipFile(target, "a") as zf:
            zf.write(wheel, arcname=wheel.name)
            zf.writestr(CONFIG_FILE, config_text)
            for arcname, path in sorted(own.items()):
                zf.write(path, arcname=arcname)
            if roster_text is not None:
                zf.writestr(ROSTER_FILE, roster_text)
    return target


def _add_shardlab_steps(target: Path, own_dirs: tuple[str, ...] = ()) -> None:
    """otter's zip with its setup.sh and run_autograder replaced by shardlab's (`setup_script`,
    `run_autograder_script`); every other entry, environment.yml included, is otter's as written."""
    with zipfile.ZipFile(target) as zf:
        entries = [(info, zf.read(info)) for info in zf.infolist()]
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for info, data in entries:
            if info.filename == "setup.sh":
                data = setup_script(own_dirs).encode()
            elif info.filename == "run_autograder":
                data = run_autograder_script(data.decode()).encode()
            zf.writestr(info, data)


def gradescope_points(cfg) -> float:
    """The number to enter as the Gradescope assignment's autograder points:
    shardlab's max_score (every auto part but the bonus, plus the answers
    sheet with a course secret); a bonus earned shows as extra credit."""
    auto = sum(part_points(p, cfg) for q in questions(cfg) for p in q.parts if p.kind == "auto" and not p.bonus)
    return _number(auto + cfg.course.answer_points * len(sheet_parts(cfg)))


def manual_outline(cfg) -> str | None:
    """The hand-graded parts (`questions.hand_graded`: the written parts with points) as manual questions
    of the Gradescope outline, beside the autograder's points: "1.a (2), 1.b (2), ..., 3.7 (4), ...: 30
    points in all"; None when the course grades none by hand. They never count in `gradescope_points`."""
    parts = hand_graded(cfg)
    if not parts:
        return None
    listed = ", ".join(f"{p.id} ({points_text(points)})" for p, points in parts)
    return f"{listed}: {points_text(sum(points for _, points in parts))} points in all"


def config_text(config_path) -> str:
    """The course config's TOML, shipped in the zip so grading uses the same config."""
    if config_path is None:
        return resources.files("shardlab.reference").joinpath("course.toml").read_text()
    return Path(config_path).read_text(encoding="utf-8")
