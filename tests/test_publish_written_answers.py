"""The written answers as the kit hands them to a student (issue 28): a place and points for every
sub-question the handout asks to derive, compute or explain (writeup.md's sections, the handout's
part lists, the Gradescope outline `shardlab build` prints), the notebook's "Written" cells saving
only what the student typed and never replacing an answer, and answers.toml shipped exactly when
the course has a secret. On the shipped course and the second one (reference/courses/a100.toml).
The notebook run top to bottom, in a kernel, is tests/test_publish_handouts.py's."""
from __future__ import annotations

import re
import sys
import tomllib

import pytest
from helpers import answered_writeup

from shardlab.autograder.core import content
from shardlab.autograder.engine.answer_sheet import ANSWERS_FILE, answer_sheet
from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.engine.writeup import PLACEHOLDER, WRITEUP_FILE, read_writeup, writeup_template, written_parts
from shardlab.autograder.publish.formats import notebook
from shardlab.autograder.publish.otter_export import gradescope_points, manual_outline
from shardlab.autograder.publish.render import render_markdown
from shardlab.autograder.publish.starter import kit_files
from shardlab.autograder.questions import questions
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

A100 = content.folder("reference") / "courses" / "a100.toml"
# every sub-question asked in prose, by course; its points by default (3.7, the free response: 4; 4.c, the
# bucket experiment on the student's own machine: 0, a place but no points), a100.toml setting 4.c to 1
SHIPPED_WRITTEN = {"1.a": 2, "1.b": 2, "2.a": 2, "3.a": 2, "3.b": 2, "3.c": 2, "3.7": 4, "4.a": 2, "4.b": 2,
                   "4.c": 0, "5.a": 2, "5.b": 2, "5.c": 2, "5.d": 2, "5.e": 2}
A100_WRITTEN = {"1.a": 2, "1.b": 2, "4.a": 2, "4.b": 2, "4.c": 1, "5.a": 2, "5.b": 2, "5.c": 2, "5.d": 2, "5.e": 2}
COURSES = {"shipped": (None, SHIPPED_WRITTEN, 77), "a100": (A100, A100_WRITTEN, 78)}


@pytest.fixture(scope="module", params=list(COURSES))
def course(request):
    """(config, {written part id: points}, autograder points, handout Markdown)."""
    path, written, auto = COURSES[request.param]
    cfg = load_config(path)
    return cfg, written, auto, render_markdown(cfg, False)


def _label(points: int) -> str:
    return {0: "not graded", 1: "1 point, graded by hand"}.get(points, f"{points} points, graded by hand")


def test_every_sub_question_asked_in_prose_has_a_section_and_points(course):
    cfg, written, auto, handout = course
    assert {p.id: p for p in written_parts(cfg)}.keys() == written.keys()
    # writeup.md: one section per written part, in handout order, its heading giving its points
    headings = re.findall(r"^## (\S+) .* \(([^()]+)\)$", writeup_template(cfg), re.M)
    assert headings == [(pid, _label(points)) for pid, points in written.items()]
    # the handout: under each sub-question (### (x)) that asks for a derivation, a computation or an
    # explanation, where its answer goes and its points; the part list's row; the question's written total
    found = {}
    for q in questions(cfg):
        text = handout.split(f"## Question {q.number} — ", 1)[1].split("\n## Question ", 1)[0]
        total = sum(points for pid, points in written.items() if pid.startswith(f"{q.number}."))
        assert re.match(rf"[^\n]*\(\d+(\.\d+)? points( \+ 1 bonus)? \+ {total} written\)\n", text), text[:120]
        for sub in re.split(r"^### ", text, flags=re.M)[1:]:
            places = re.findall(r"^\*Your answer: `writeup\.md`, section `## (\S+)` \(([^()]+)\)\.\*$", sub, re.M)
            asked = re.search(r"\?|derive it, then compute it|explain", sub)
            implemented = sub.startswith("(f) A 1F1B pipeline")        # code, graded on gloo ranks
            assert len(places) == (0 if implemented else 1) and (asked or implemented), sub[:200]
            found.update(places)
        for pid, points in written.items():
            if pid.startswith(f"{q.number}."):
                shown = f"{points}, by hand" if points else "not graded"
                assert re.search(rf"^\| {re.escape(pid)} \| [^|]+ \| {shown} \|", text, re.M), pid
    assert found == {pid: _label(points) for pid, points in written.items()}
    # Gradescope: the autograder's points unchanged, the hand-graded parts listed beside them
    graded = [(pid, points) for pid, points in written.items() if points]
    assert gradescope_points(cfg) == auto
    assert manual_outline(cfg) == (", ".join(f"{pid} ({points})" for pid, points in graded)
                                   + f": {sum(points for _, points in graded)} points in all")


def test_answers_toml_ships_exactly_with_a_secret_and_everything_says_what_to_submit(course):
    cfg, _, _, handout = course
    kit = kit_files(cfg, handout) if cfg.course.secret else None   # the shipped course's: tests/test_engine_writeup.py
    top = handout.split("\n## ", 1)[0]
    if not cfg.course.secret:
        assert "answers.toml" not in handout
        assert "the folder that holds `assignments/` and `writeup.md` and submit it" in top
        return
    sheet = tomllib.loads(kit[ANSWERS_FILE])
    assert sheet.pop("student_id") == ""
    assert sheet == {section: {key: 0 for key in items} for section, items in answer_sheet(cfg).items()}
    assert "comes with your own handout from your instructor" in kit[ANSWERS_FILE]
    readme = kit["README.md"]
    assert "zip -r submission.zip assignments writeup.md answers.toml" in readme
    assert "in place of the kit's blank one" in readme and "Optionally" not in readme
    for text in (top, readme):
        assert "`assignments/`, `writeup.md` and `answers.toml`" in text
    assert "your own copy of it comes with your own handout" in top
    # a per-student handout carries that student's own sheet (`publish.roster`)
    variant = variant_config(cfg, "u1001")
    own = render_markdown(variant, False, student=dict(id="u1001", name="Ada", answers='student_id = "u1001"\n'))
    assert "`answers.toml` (see the end of this handout)" in own and "## Your answers.toml" in own


def test_written_cells_save_only_what_was_typed_and_never_replace_an_answer(course, tmp_path, monkeypatch):
    """The notebook's setup cell and its "Written" cells, run in this process in a kit folder."""
    cfg, written, _, handout = course
    nb = notebook(cfg, handout, {})
    cells = [c.source for c in nb.cells if c.cell_type == "code" and c.source.startswith("write_answer(")]
    assert [re.match(r"write_answer\('([^']+)'", c).group(1) for c in cells] == list(written)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))        # the setup cell puts the kit's folder first,
    monkeypatch.setattr(sys, "dont_write_bytecode", sys.dont_write_bytecode)     # and writes no bytecode
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    kernel: dict = {}
    exec(nb.cells[1].source.replace("from __future__ import annotations", ""), kernel)   # IPython allows it
    path = tmp_path / WRITEUP_FILE

    def run(cell: str) -> None:
        exec(cell, kernel)

    # answered in the file: running every untouched cell changes no byte of it
    path.write_bytes(answered_writeup(writeup_template(cfg)).encode())
    before = path.read_bytes()
    for cell in cells:
        run(cell)
    assert path.read_bytes() == before
    # blank: a cell saves what was typed in it (backslashes kept), replaces its own earlier text, and
    # never what the student wrote in the file; a cell back to its placeholder saves nothing
    path.write_text(writeup_template(cfg))
    first, second = cells[0], cells[1]
    one, two = first.split("'")[1], second.split("'")[1]
    run(first.replace(PLACEHOLDER, r"$\frac{16 P}{80 \cdot 10^9}$ devices, \n kept"))
    assert read_writeup(tmp_path)[one] == r"$\frac{16 P}{80 \cdot 10^9}$ devices, \n kept"
    run(first.replace(PLACEHOLDER, "Second thoughts, from the cell."))
    assert read_writeup(tmp_path)[one] == "Second thoughts, from the cell."
    path.write_text(path.read_text().replace("Second thoughts, from the cell.", "Edited in writeup.md."))
    by_hand = path.read_bytes()
    run(first.replace(PLACEHOLDER, "The cell again."))
    run(first)
    assert path.read_bytes() == by_hand
    # the prompt under the heading stays, and the section's answer is the typed text alone
    run(second.replace(PLACEHOLDER, "Two."))
    assert read_writeup(tmp_path) == {**{pid: "" for pid in written}, one: "Edited in writeup.md.", two: "Two."}
    assert f"<!-- {written_parts(cfg)[1].description} -->" in path.read_text()
    # a heading the student deleted is added back at the end, with the answer under it
    path.write_text("# Written answers\n\nMy own notes.\n")
    run(first.replace(PLACEHOLDER, "Back."))
    assert path.read_text().startswith("# Written answers\n\nMy own notes.\n\n## ")
    assert read_writeup(tmp_path) == {one: "Back."}
