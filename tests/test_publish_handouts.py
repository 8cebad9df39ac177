"""shardlab build's handouts: solutions numbers equal the reference, HTML from
the Markdown, the notebook validates and runs against the solutions, figures."""
import re
import shutil
import zipfile

import nbformat
import pytest
from helpers import answered_writeup

from shardlab.autograder.publish.mathtext import to_tex
from shardlab.autograder.engine.writeup import PLACEHOLDER, WRITEUP_FILE, read_writeup, written_parts
from shardlab.autograder.engine.answer_sheet import answer_sheet
from shardlab.autograder.questions import questions
from shardlab.autograder.publish.kit_harness import distributed_parts
from shardlab.autograder.publish.render import BUCKETS_PNG, build
from shardlab.autograder.publish.stubs import SOLUTIONS

pytestmark = pytest.mark.platform


@pytest.fixture(scope="module")
def out(tmp_path_factory, cfg):
    folder = tmp_path_factory.mktemp("build")
    (folder / BUCKETS_PNG).parent.mkdir()
    (folder / BUCKETS_PNG).write_bytes(b"\x89PNG stand-in for the bench plot")
    build(cfg, folder)
    return folder


def test_every_derivation_in_the_solutions_is_the_reference(out, cfg):
    solutions = (out / "solutions.md").read_text()
    # (two quantities may share a value: GPipe holds as much on every stage)
    worked = {(w.quantity, w.shown): w for q in questions() if q.worked for w in q.worked(cfg).values()}
    # each rendered derivation "= **result**" is one the reference computed, in full
    shown = re.findall(r"^- \*\*(.+?)\*\*: (.+) = \*\*(.+)\*\*$", solutions, re.M)
    assert len(shown) >= 25
    for quantity, rest, result in shown:
        w = worked[(quantity, result)]
        assert rest == f"${to_tex(w.formula)}$ = {w.substituted}"   # typeset formula
    # and every number a student is asked for is among them
    for items in answer_sheet(cfg).values():
        for w in items.values():
            assert f"**{w.quantity}**: ${to_tex(w.formula)}$ = {w.substituted} = **{w.shown}**" in solutions


def test_known_default_answers(out):
    # by hand: P = 2 * 16384 * 53248 * 126 = 219,848,638,464; 16P / 80e9 -> 44 H100s
    solutions = (out / "solutions.md").read_text()
    assert "219,848,638,464 parameters" in solutions and "44 × H100" in solutions


def test_html_is_the_markdown(out):
    html = (out / "handout.html").read_text()
    assert html.startswith("<!DOCTYPE html>")
    assert "<table>" in html and "<td>1.6</td>" in html and "<code>min_fsdp_degree</code>" in html
    solutions = (out / "solutions.html").read_text()
    assert '<img src="memory-breakdown.png"' in solutions and f'<img src="{BUCKETS_PNG}"' in solutions


def test_solutions_figures_and_mistakes(out):
    solutions = (out / "solutions.md").read_text()
    assert (out / "memory-breakdown.png").read_bytes()[:4] == b"\x89PNG"
    mistakes = solutions.split("## Common mistakes the grader recognises")[1]
    assert "Task 1.2 (`training_state_bytes`): a value that matches 12 bytes/param" in mistakes
    assert "GiB" in mistakes
    handout = (out / "handout.md").read_text()
    assert "Common mistakes" not in handout and "memory-breakdown.png" not in handout


def test_no_bucket_plot_no_link(tmp_path, cfg):
    build(cfg, tmp_path)
    assert "bench/buckets.png" not in (tmp_path / "solutions.md").read_text()


def test_notebook_validates_and_runs_on_the_solutions(out, tmp_path):
    """In the starter kit's folder with the solutions in assignments/: every check cell
    passes, the distributed ones on local gloo ranks; run top to bottom, the notebook
    changes no byte of a writeup.md answered in the file, nor anything in assignments/."""
    from nbclient import NotebookClient     # jupyter's client (0.2 s): only where a kernel runs
    with zipfile.ZipFile(out / "starter-kit.zip") as zf:
        zf.extractall(tmp_path)
    kit = tmp_path / "starter-kit"
    nb = nbformat.read(kit / "handout.ipynb", as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert any("run_checks('memory'" in c.source for c in code)
    assert {c.source for c in code if "run_distributed" in c.source and "def " not in c.source} == {
        f"run_distributed({p.id!r})" for p in distributed_parts()}
    shutil.rmtree(kit / "assignments")
    shutil.copytree(SOLUTIONS, kit / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    (kit / WRITEUP_FILE).write_bytes(answered_writeup((kit / WRITEUP_FILE).read_text()).encode())
    writeup = (kit / WRITEUP_FILE).read_bytes()
    assignments = {p: p.read_bytes() for p in (kit / "assignments").rglob("*")}
    NotebookClient(nb, timeout=120, kernel_name="python3",
                   resources={"metadata": {"path": str(kit)}}).execute()
    assert (kit / WRITEUP_FILE).read_bytes() == writeup
    assert {p: p.read_bytes() for p in (kit / "assignments").rglob("*")} == assignments   # no __pycache__ either
    # per cell: a busy kernel may send one print as several stream messages
    printed = ["".join(o.text for o in c.outputs if o.get("name") == "stdout") for c in code]
    passed = [text for text in printed if text]
    assert len(passed) == len(code) - 1, printed
    assert all("public checks passed" in t or "public runs passed on local gloo ranks" in t
               or t.startswith(("bucketed-ddp: ", "fsdp: ", "pipeline: ")) or ": nothing to save (" in t
               for t in passed), printed
    # the drawn tasks' timelines, drawn from this run and shown inline (a PNG in the cell's output)
    shown = {c.source: [o for o in c.outputs if "image/png" in o.get("data", {})] for c in code
             if c.source.startswith("show_timeline(")}
    assert set(shown) == {"show_timeline('4.7')", "show_timeline('2.11')", "show_timeline('5.10')"}
    assert all(len(images) == 1 for images in shown.values()), shown
    assert "started before backward ended" in next(t for t in printed if t.startswith("bucketed-ddp: "))
    assert "stage 0: FFBFBFBB, up to 2 in flight, as 1F1B" in next(t for t in printed if t.startswith("pipeline: "))
    # each written deliverable's cell, untouched, saved nothing (tests/test_publish_written_answers.py)
    assert [t.split(":")[0] for t in passed if ": nothing to save (" in t] == [p.id for p in written_parts()]
    assert set(read_writeup(kit)) == {p.id for p in written_parts()}


def test_run_all_on_failing_code_reports_every_check_and_saves_every_typed_answer(out, tmp_path):
    """Issue 45: on the stubs, Run All goes to the end (a failing check cell reports in red and does
    not stop the notebook), so the answers typed in the Written cells below it land in writeup.md;
    each Written cell comes after its sub-question's text."""
    from nbclient import NotebookClient
    with zipfile.ZipFile(out / "starter-kit.zip") as zf:
        zf.extractall(tmp_path)
    kit = tmp_path / "starter-kit"
    nb = nbformat.read(kit / "handout.ipynb", as_version=4)
    sources = [c.source for c in nb.cells]
    for part in written_parts():
        number, letter = part.id.split(".")
        cell = next(k for k, src in enumerate(sources) if src.startswith(f"write_answer({part.id!r}"))
        question = next(k for k, src in enumerate(sources) if src.startswith(f"## Question {number} "))
        after = [k for k, src in enumerate(sources) if k > question and src.startswith("## ")]
        sub = [k for k, src in enumerate(sources) if question < k < (after or [len(sources)])[0]
               and src.startswith(f"### ({letter})")]
        assert question < cell < (after or [len(sources)])[0], part.id     # within its question
        assert not sub or sub[0] < cell, part.id                            # after its sub-question's text
        assert sources[cell - 1].startswith(f"**Written {part.id}**")
    typed = {"1.a": "Four hundred devices, typed in the notebook.", "5.e": "Twenty micro-batches."}
    for cell in nb.cells:
        for part_id, answer in typed.items():
            if cell.source.startswith(f"write_answer({part_id!r}"):
                cell.source = cell.source.replace(PLACEHOLDER, answer)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(kit)}}).execute()
    assert {k: v for k, v in read_writeup(kit).items() if v} == typed
    def stderr_of(start: str) -> str:
        cell = next(c for c in nb.cells if c.source.startswith(start))        # the first such cell: 1.1's
        return "".join(o.text for o in cell.outputs if o.get("name") == "stderr")
    checks, runs = stderr_of("run_checks('memory'"), stderr_of("run_distributed('5.9')")
    assert "FAILED" in checks and "Task 1.1" in checks, checks
    assert "FAILED" in runs and "NotImplementedError" in runs, runs


def test_a_pipe_in_a_description_stays_in_its_table_cell(cfg):
    """2.7 and 4.5 state their tolerance with |w|: the HTML row keeps four cells, the text whole."""
    import re
    from shardlab.autograder.publish.formats import to_html
    from shardlab.autograder.publish.render import render_markdown
    page = to_html(render_markdown(cfg, False), "handout")
    for task in ("2.7", "4.5"):
        row = re.search(rf"<tr>\s*<td>{re.escape(task)}</td>(.*?)</tr>", page, re.S).group(1)
        assert row.count("<td>") == 3 and "1e-4·|w|)" in row, row
