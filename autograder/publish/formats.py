"""The handout's other formats: HTML through markdown-it-py (CommonMark plus
tables, and `$...$` math turned into MathML at build time), and a Jupyter
notebook built with nbformat: the handout's Markdown split into one cell
per section, after each task's heading a code cell that imports the
student's module and runs that task's public checks (`kit.comparison`,
inlined in the first code cell: the grader's own comparison rules), after
each distributed task's a cell that runs its public cases on local gloo ranks
with the kit's copy of the grader's checks (tests/shardlab_local/, so it
runs in the starter kit's folder) and, for the overlap tasks, a cell that
shows the traced timeline of one step (`kit.timelines`) inline, and
for each written deliverable, after its sub-question's text, a cell that
saves the answer typed in it in writeup.md (an untouched cell saves nothing;
no cell replaces an answer it did not save). A failing check reports every
failing case in red and does not raise, so Run All never stops before a
Written cell (docs/spec.md, "Written answers")."""
from __future__ import annotations

import base64
import html
import inspect
import json
import re

import nbformat
from markdown_it import MarkdownIt
from mdit_py_plugins.dollarmath import dollarmath_plugin

from shardlab.autograder.kit import comparison
from shardlab.autograder.publish.diagrams import document_figures
from shardlab.autograder.publish.kit_harness import is_distributed
from shardlab.autograder.engine.writeup import PLACEHOLDER, points_label
from shardlab.autograder.questions import part_points, registered

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }}
table {{ border-collapse: collapse; }} th, td {{ border: 1px solid #bbb; padding: .25rem .5rem; }}
code {{ background: #f3f3f3; }} img {{ max-width: 100%; }}
</style>
</head>
<body>
{body}</body>
</html>
"""


def mathml(latex: str, options: dict) -> str:
    """LaTeX math as MathML, made here at build time: the page needs no script
    and no network to show it (every current browser renders MathML)."""
    from latex2mathml.converter import convert
    try:
        return convert(latex, display="block" if options.get("display_mode") else "inline")
    except Exception:  # noqa: BLE001 - a formula the converter cannot read stays readable as text
        return f"<code>{html.escape(latex)}</code>"


def to_html(markdown: str, title: str) -> str:
    """A standalone HTML page of the Markdown (raw HTML in the source is
    escaped); `$...$` and `$$...$$` math becomes MathML."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table").use(
        dollarmath_plugin, allow_digits=False, allow_space=False, renderer=mathml)
    return PAGE.format(title=html.escape(title), body=md.render(markdown))


SETUP = '''\
# Run this cell first. It makes assignments/ importable and defines the checks.
import importlib, json, os, sys
sys.path.insert(0, os.getcwd())
# nothing this notebook runs writes into assignments/ (no __pycache__ beside your code, here or in the ranks)
sys.dont_write_bytecode = True
os.environ["PYTHONDONTWRITEBYTECODE"] = "1"

{helper}

def report_failures(what, failures):
    """Every failing case of a cell, in red (stderr). Never raised: Run All goes on to the cells
    below, so each Written cell still saves your answer in writeup.md."""
    print(f"FAILED: {{len(failures)}} {{what}}\\n" + "\\n".join(failures), file=sys.stderr)


def run_checks(module, cases):
    """Reload assignments.<module> (so your edits count) and run the public checks."""
    cases = json.loads(cases)
    try:
        importlib.reload(importlib.import_module(f"assignments.{{module}}"))
    except Exception as exc:  # noqa: BLE001 - reported, not raised (report_failures)
        return report_failures(f"of {{len(cases)}} public checks: assignments/{{module}}.py failed to import",
                               [f"{{type(exc).__name__}}: {{exc}}"])
    failures = []
    for case in cases:
        try:
            check(**case["check"])
        except Exception as exc:  # noqa: BLE001 - every failing case is shown
            failures.append(f"{{case['id']}}: {{type(exc).__name__}}: {{exc}}")
    if failures:
        return report_failures(f"of {{len(cases)}} public checks failed", failures)
    print(f"all {{len(cases)}} public checks passed")


def kit_runs(part_id):
    """The public runs of a distributed task (tests/public_runs.json), with the kit's
    tests/ folder importable (its copy of the grader's checks and timelines.py)."""
    tests = os.path.join(os.getcwd(), "tests")
    if not os.path.isfile(os.path.join(tests, "public_runs.json")):
        raise FileNotFoundError("run this notebook in the starter kit's folder (it needs tests/public_runs.json)")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    with open(os.path.join(tests, "public_runs.json")) as f:
        return [r for q in json.load(f).values() for r in q if r["part"] == part_id]


def run_distributed(part_id):
    """Run a distributed task's public cases on local gloo ranks, checked by the kit's copy
    of the grader's own checks (tests/shardlab_local/), on fresh ranks so your edits count."""
    runs = kit_runs(part_id)
    from shardlab_local.local_checks import Ranks, check_run
    ranks, failures = Ranks(os.getcwd()), []
    try:
        for run in runs:
            try:
                check_run(run, ranks)
            except Exception as exc:  # noqa: BLE001 - every failing run is shown
                failures.append(f"{{run['id']}}: {{exc}}")
    finally:
        ranks.close()
    if failures:
        return report_failures(f"of {{len(runs)}} public runs failed on local gloo ranks", failures)
    print(f"all {{len(runs)}} public runs passed on local gloo ranks")


def show_timeline(part_id):
    """Trace one training step of your class for `part_id` on local gloo ranks and show it
    (tests/timelines.py; the files land in timelines/, the .trace.json opens in Perfetto)."""
    from pathlib import Path
    from IPython.display import Image, display
    runs = kit_runs(part_id)
    from shardlab_local.timelines.drawing import draw_timelines
    out = Path.cwd() / "timelines"
    try:
        for line in draw_timelines(runs, os.getcwd(), out):
            print(line)
    except Exception as exc:  # noqa: BLE001 - reported, not raised (report_failures)
        return report_failures("timeline: it could not be drawn", [f"{{type(exc).__name__}}: {{exc}}"])
    png = out / (runs[0]["drawn"]["stem"] + ".png")
    if png.exists():
        display(Image(filename=str(png)))


PLACEHOLDER = {placeholder}


def _answer(text):
    """An answer as graders read it: without the comments and the placeholder."""
    import re
    return re.sub(r"<!--.*?-->", "", text, flags=re.S).replace(PLACEHOLDER, "").strip()


def _stamp(answer):
    """The note saved above an answer this notebook wrote: it may replace that answer, never another."""
    import hashlib
    return "<!-- saved from handout.ipynb: " + hashlib.sha256(answer.encode()).hexdigest()[:16] + " -->"


def write_answer(part_id, text):
    """Save the answer you typed in this cell under its heading in writeup.md (hand that file in).
    Only what you typed is saved: a cell still holding the placeholder saves nothing, and an answer
    in writeup.md that this notebook did not save there (one you wrote in the file) is never replaced."""
    import re
    answer = _answer(text)
    if not answer:
        print(f"{{part_id}}: nothing to save (type your answer in place of {{PLACEHOLDER}}, then run this cell)")
        return
    path = os.path.join(os.getcwd(), "writeup.md")
    old = open(path, encoding="utf-8").read() if os.path.exists(path) else "# Written answers\\n"
    found = re.search(r"^## +" + re.escape(part_id) + r"(?:[ \\t][^\\n]*)?$", old, re.M)
    if found is None:
        new = old.rstrip("\\n") + f"\\n\\n## {{part_id}}\\n\\n{{_stamp(answer)}}\\n{{answer}}\\n"
    else:
        following = re.compile(r"^## ", re.M).search(old, found.end())
        end = following.start() if following else len(old)
        body = old[found.end():end]
        there = _answer(body)
        if there == answer:
            print(f"{{part_id}}: already in writeup.md ({{len(answer.split())}} words)")
            return
        if there and _stamp(there) not in body:
            print(f"{{part_id}}: NOT saved. writeup.md already has an answer under '## {{part_id}}' that this "
                  "notebook did not write, and it stays as it is. To save this cell's text instead, delete "
                  "that answer from writeup.md and run this cell again.", file=sys.stderr)
            return
        prompts = [c for c in re.findall(r"<!--.*?-->", body, re.S) if not c.startswith("<!-- saved from ")]
        new = (old[:found.end()] + "\\n\\n" + "".join(c + "\\n\\n" for c in prompts) + _stamp(answer) + "\\n"
               + answer + "\\n\\n" + old[end:])
    with open(path, "w", encoding="utf-8") as f:
        f.write(new.rstrip("\\n") + "\\n")
    print(f"saved {{part_id}} in writeup.md ({{len(answer.split())}} words)")
'''

_SECTION = re.compile(r"^(?=#{2,3} )", re.M)


def _markdown_cell(text: str, figures: dict[str, bytes]) -> nbformat.NotebookNode:
    """A markdown cell whose figures travel inside it (cell attachments), so the
    notebook shows them wherever it is opened."""
    attachments = {}

    def attach(m: re.Match) -> str:
        path = m.group(2)
        if path not in figures:
            return m.group(0)
        name = path.rsplit("/", 1)[-1]
        attachments[name] = {"image/png": base64.b64encode(figures[path]).decode()}
        return f"![{m.group(1)}](attachment:{name})"
    cell = nbformat.v4.new_markdown_cell(re.sub(r"!\[([^\]]*)\]\(([^)\s]+)\)", attach, text))
    if attachments:
        cell.attachments = attachments
    return cell


def notebook(cfg, handout_md: str, checks: dict) -> nbformat.NotebookNode:
    """One markdown cell per handout section; a check cell per locally checked task after its
    question's heading; each Written cell after the text of its sub-question ("### (a) ..."), or
    at its question's end."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    helper = inspect.getsource(comparison).split('"""', 2)[2].strip()
    cells: list = []
    figures = {path: png for path, _, png in document_figures(cfg, False).values()}
    q_number: str | None = None
    written: dict[str, object] = {}         # the current question's Written parts not yet placed, by id
    for section in _SECTION.split(handout_md):
        if section.startswith("## "):       # a question (or any top section) ends the one before
            cells += [c for part in written.values() for c in _written_cells(cfg, part)]
            written = {}
        if section.strip():
            cells.append(_markdown_cell(section.strip(), figures))
        if not cells:
            continue
        sub = re.match(r"### \(([a-z])\)", section)
        if sub and q_number is not None and (part := written.pop(f"{q_number}.{sub.group(1)}", None)):
            cells += _written_cells(cfg, part)
        if not section.startswith("## "):
            continue
        q_number = section.split()[2] if section.startswith("## Question") else None
        if q_number is None:
            continue
        q = next(q for q in registered() if str(q.number) == q_number)
        cells += _check_cells(q, checks.get(q_number, {}))
        written = {p.id: p for p in q.parts if p.kind == "manual"}      # `engine.writeup`
    cells += [c for part in written.values() for c in _written_cells(cfg, part)]
    cells.insert(1, nbformat.v4.new_code_cell(SETUP.format(helper=helper, placeholder=json.dumps(PLACEHOLDER))))
    nb.cells = cells
    nbformat.validate(nb)
    return nb


def _check_cells(q, checks: dict) -> list:
    """A question's check cells: its public checks per task, its distributed tasks' public runs
    and timelines."""
    cells = []
    for part_id, cases in checks.items():
        part = next(p for p in q.parts if p.id == part_id)
        todo = (f"Fill it in in `assignments/{q.module}.py`, then run the public checks:" if part.function
                else "It checks your functions above against a real run; run it once they pass:")
        title = f"`{part.title}`" if part.function else part.title      # 1.8 is a check, not a function
        stop = "" if part.description.endswith(("?", ".")) else "."
        cells.append(nbformat.v4.new_markdown_cell(
            f"**Task {part_id}** {title}: {part.description}{stop} {todo}"))
        cells.append(nbformat.v4.new_code_cell(
            f"run_checks({q.module!r}, r'''{json.dumps(cases)}''')"))
    for part in filter(is_distributed, q.parts):
        cells.append(nbformat.v4.new_markdown_cell(
            f"**Task {part.id}** {part.title}: {part.description}. This cell runs its public cases on "
            f"local gloo ranks, with the grader's own checks:"))
        cells.append(nbformat.v4.new_code_cell(f"run_distributed({part.id!r})"))
        if part.drawn:       # a timeline cell follows the check cell
            cells.append(nbformat.v4.new_markdown_cell(
                "One training step of your class, traced on the same ranks: compute above, each collective "
                "below, per rank (compare with the handout's figure):"))
            cells.append(nbformat.v4.new_code_cell(f"show_timeline({part.id!r})"))
    return cells


def _written_cells(cfg, part) -> list:
    """A written deliverable's two cells: what to write, and the cell that saves it in writeup.md."""
    return [nbformat.v4.new_markdown_cell(
                f"**Written {part.id}** {part.title} ({points_label(part_points(part, cfg))}): "
                f"{part.description}. Type your answer below in place of `{PLACEHOLDER}` and run the cell: it "
                "saves your text under its heading in `writeup.md`, which you hand in beside `assignments/`. "
                "Or write it in `writeup.md` directly: a cell left as it is saves nothing, and no cell ever "
                "replaces an answer it did not save."),
            nbformat.v4.new_code_cell(f'write_answer({part.id!r}, r"""\n{PLACEHOLDER}\n""")')]


def notebook_json(cfg, handout_md: str, checks: dict) -> str:
    return nbformat.writes(notebook(cfg, handout_md, checks))
