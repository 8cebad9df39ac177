"""The second course (reference/courses/a100.toml), as unlike the shipped one
as we could make it: a 70B-class model on its own A100 40GB table and TPU
v5e, three questions (1, 4, 5), custom points, a secret with per-student
variants from its own [variants], and a five-student roster. Built with the
CLI the way an instructor would, then graded (solutions, stubs, a batch);
the Gradescope replay of its zip is in test_platforms_gradescope.py.

Nothing built for it may name a device or a model the course does not have.
Expected numbers are derived here by hand from the course file."""
from __future__ import annotations

import csv
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.engine.answer_sheet import sheet_toml
from shardlab.autograder.engine.grading import grade_folder
from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
from shardlab.reference.config import load_config
from helpers import run_cli

pytestmark = pytest.mark.platform

COURSES = content.folder("reference") / "courses"
COURSE, ROSTER = COURSES / "a100.toml", COURSES / "a100-roster.csv"
STUDENTS = ["u1001", "u1002", "u1003", "u1004", "u1005"]
# devices and models of the shipped course (and of the old fixed variant ranges): none is this course's
FOREIGN = re.compile(r"H100|H200|TPU v5p|\bXXL\b|\bL70\b")
# points by hand: question 1's total is set to 30, question 5's to 25; question 4's parts are worth
# 2 (4.1), 1, 1, 1, 4, 2, 2 and 4.1 is set to 6: 17; answers.toml is 2 points per question (3 questions)
POINTS = {"1": 30, "4": 17, "5": 25, "answers": 6}


@pytest.fixture(scope="module")
def course():
    return load_config(COURSE)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("a100") / "out"
    done = run_cli("build", "--config", str(COURSE), "--roster", str(ROSTER), "--out", str(out))
    assert done.returncode == 0, done.stderr
    return out, done


def _texts(folder: Path):
    for path in sorted(folder.rglob("*")):
        if path.suffix in (".md", ".html", ".ipynb", ".py", ".json", ".toml", ".csv", ".txt", ".sh", ".yml"):
            yield path, path.read_text(errors="replace")
        elif path.suffix == ".zip":
            with zipfile.ZipFile(path) as zf:
                for name in zf.namelist():
                    if Path(name).suffix in (".md", ".ipynb", ".py", ".json", ".txt"):
                        yield path / name, zf.read(name).decode(errors="replace")


def test_nothing_built_names_hardware_or_a_model_the_course_lacks(built):
    out, done = built
    assert "degenerate" not in done.stderr
    seen = 0
    for path, text in _texts(out):
        seen += 1
        hit = FOREIGN.search(text)
        assert hit is None, f"{path}: {text[max(0, hit.start() - 100):hit.end() + 60]!r}"
    assert seen > 40


def test_the_handout_sets_the_courses_three_questions_on_its_hardware(built):
    out, _ = built
    handout = (out / "handout.md").read_text()
    assert re.findall(r"^## Question (\d)", handout, re.M) == ["1", "4", "5"]
    assert "A100 40GB" in handout and "TPU v5e" in handout and "F70" in handout
    # the autograded points as [points] sets them, then the written parts', graded by hand (4.c: 1, as set)
    assert "(30 points + 4 written)" in handout and "(17 points + 5 written)" in handout
    assert "(25 points + 10 written)" in handout
    # question 1's parts scaled to 30 points (30/14 of each) show at most two decimals, as every score does
    rows = re.findall(r"^\| ([145]\.\d+) \| [^|]+ \| ([^|]+) \|", handout, re.M)
    assert len(rows) > 10 and all(re.fullmatch(r"\d+(\.\d\d?)?", points.strip()) for _, points in rows), rows
    assert any("." in points for part, points in rows if part.startswith("1."))
    solutions = (out / "solutions.md").read_text()
    # 16 P = 16 · 2 · 8192 · 53248 · 80 = 1,116,691,496,960 bytes over 40e9: 27.9, so 28 A100 40GBs
    assert "28 × A100 40GB" in solutions


def test_each_student_gets_a_variant_from_the_courses_ranges(built, course):
    out, _ = built
    models = set()
    for sid in STUDENTS:
        handout = (out / "students" / sid / "handout.md").read_text()
        v = variant_config(course, sid)
        models.add(v.model)
        assert f"Consider {v.model.name} trained on {v.memory.tokens_per_device:,} tokens" in handout
        assert v.model.d_model in (6144, 7168, 8192, 9216, 10240) and v.model.num_blocks == 80
        assert f"{v.model.d_model:,}" in handout
        blank = (out / "students" / sid / "answers.toml").read_text()
        assert f'student_id = "{sid}"' in blank
    assert len(models) > 1


def test_every_students_key_is_written_for_the_instructor_and_never_for_the_student(built, course):
    out, done = built
    assert f"answer keys (<student_id>.md each, all of them in keys.json) under {out / 'keys'}" in done.stdout
    assert sorted(p.name for p in (out / "keys").iterdir()) == sorted([f"{s}.md" for s in STUDENTS] + ["keys.json"])
    keys = json.loads((out / "keys" / "keys.json").read_text())
    assert list(keys) == STUDENTS and keys["u1001"]["name"] == "Ada Lovelace"
    assert not [p for p in (out / "students").rglob("*") if p.name.lower().startswith("key")]
    student_texts = [text for _, text in _texts(out / "students")]
    for sid in STUDENTS:
        m = variant_config(course, sid).model
        params = 2 * m.d_model * m.d_ff * m.num_blocks      # by hand: P = 2 · D · F · L
        assert keys[sid]["model"] == m.name and keys[sid]["questions"]["1"]["params"]["value"] == params
        md = (out / "keys" / f"{sid}.md").read_text()
        assert md.startswith(f"# Answer key for the variant of student {sid} (model {m.name})")
        assert f"| parameters | P = 2 · D · F · L | 2 · {m.d_model:,} · {m.d_ff:,} · 80 | {params:,} parameters |" in md
        # the key's answers are in no student's file (the handouts only ask)
        assert not [t for t in student_texts if f"{params:,}" in t or f"{16 * params:,}" in t]


def _submission(root: Path, source: Path, student_id: str | None, course) -> Path:
    shutil.copytree(source, root / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    if student_id:
        (root / "answers.toml").write_text(sheet_toml(variant_config(course, student_id), student_id, values=True))
    return root


def test_the_solutions_with_a_students_answers_score_full_marks(course, tmp_path):
    report = grade_folder(_submission(tmp_path, SOLUTIONS, "u1002", course), course, label="u1002")
    assert {q.id: q.max_score for q in report.questions} == pytest.approx(POINTS)
    lost = [(p.id, p.feedback) for q in report.questions for p in q.parts if p.score < p.max_score]
    assert lost == [] and report.score == pytest.approx(78)


def test_a_batch_of_the_course_grades_and_remembers_it(course, tmp_path):
    good = _submission(tmp_path / "good", SOLUTIONS, "u1004", course)
    stubs = _submission(tmp_path / "stubs", ASSIGNMENTS, None, course)
    out = tmp_path / "out"
    done = run_cli("grade", "--config", str(COURSE), "--out", str(out), str(good), str(stubs))
    assert done.returncode == 0, done.stderr
    with open(out / "gradebook.csv", newline="") as fh:
        rows = {r["submission"]: r for r in csv.DictReader(fh)}
    assert float(rows["good"]["total"]) == pytest.approx(78) and float(rows["stubs"]["total"]) == 0
    assert not [c for c in rows["good"] if re.fullmatch(r"[23]\.\d+", c)]      # no part of 2 or 3
    feedback = (out / "feedback" / "stubs.md").read_text()
    shown = re.findall(r"\((\d+(?:\.\d+)?) / (\d+(?:\.\d+)?)\)", feedback)       # "(0 / 2.14)" per part
    assert len(shown) > 10 and all(re.fullmatch(r"\d+(\.\d\d?)?", x) for pair in shown for x in pair), shown
    result = json.loads((out / "results" / "good.json").read_text())
    assert result["course"] == {"name": "Scaling Deep Learning Systems", "sha256": course.sha256}
    # the graders see each submission's own numbers beside its written answer
    assert [q["student_id"] for q in result["questions"] if q["id"] == "answers"] == ["u1004"]
    m = variant_config(course, "u1004").model
    written = (out / "written" / "1.b.md").read_text()
    assert (f"## good\n\nVariant of student `u1004` (model {m.name}): parameters = "
            f"{2 * m.d_model * m.d_ff * m.num_blocks:,} parameters;") in written
    assert "## stubs\n\nVariant: unknown (no student id was graded" in written


def test_rounding_down_is_named_as_itself_never_as_a_gib_mix_up(course, tmp_path):
    """devices_needed with floor for ceil, on this course's A100 40GB: the course model's 1,136,824,156,160
    bytes are 28.42 devices (ceil 29, floor 28; with GiB mixed in 1,058.74 / 40 rounds up to 27), so
    the one mistake that gives 28 is rounding down, and GiB is never claimed."""
    root = _submission(tmp_path, SOLUTIONS, None, course)
    with open(root / "assignments" / "memory.py", "a") as fh:
        fh.write("\n\ndef devices_needed(total_bytes, device_bytes):\n    return total_bytes // device_bytes\n")
    report = grade_folder(root, course, modules={"memory"})
    feedback = report.part("1.4").feedback
    assert report.part("1.4").score < report.part("1.4").max_score
    assert "rounding down" in feedback and "GiB" not in feedback, feedback
