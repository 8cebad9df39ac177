"""What `grade --out OUT` does with a folder that already holds a batch: merge into it or refuse,
and say which; never a gradebook.csv or written/ silently shrunk to this run's submissions.

- A fresh folder (no results/*.json): nothing to say.
- The same course (OUT/batch.json names this run's course sha256): merge. Every earlier result whose
  submission this run does not grade is kept as graded (its row, its written answers, its feedback);
  a submission graded again replaces its row. Each row keeps its own `grader_version`, so a re-grade
  after a fix can still be told from the rows it did not touch.
- Another course, or a folder without a readable batch.json (an older grader's, which did not record
  its course): rows graded against two courses never share a gradebook. When this run grades every
  submission the folder holds, the folder is graded again from scratch (said in one line); otherwise
  it is refused, naming the remedy: the batch's own course to merge, or a new --out.

`platforms.batch.grade_many` calls `earlier_batch` before grading anything, so a refusal costs
nothing; a class report built from a batch folder (gradebook.csv and results/) reads the merged
rows as any other.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.results import course_shown
from shardlab.autograder.sandbox import untrusted

BATCH_FILE = "batch.json"     # OUT/batch.json: the course and grader a batch folder was graded with


@dataclass(frozen=True)
class Earlier:
    """The rows of an earlier batch a run keeps (submission name -> its result), and the one line
    saying what the run does with the folder ("" for a fresh one)."""

    kept: dict[str, dict]
    note: str


def _recorded(out: Path) -> dict | None:
    """OUT/batch.json as written (`course`, `config`, `grader_version`), or None when absent or unreadable."""
    try:
        recorded = json.loads((out / BATCH_FILE).read_text(encoding="utf-8"))
        recorded["course"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return recorded if isinstance(recorded, dict) else None


def _names(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _read(path: Path) -> dict | None:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


def earlier_batch(out: Path, batch: dict, names: list[str]) -> Earlier:
    """What a run grading the submissions `names` against `batch["course"]` keeps of `out`, or a
    one-line refusal (ShardlabError) when keeping them would mix courses and leaving them out would
    shrink the gradebook."""
    found = sorted(p.stem for p in (out / "results").glob("*.json")) if (out / "results").is_dir() else []
    if not found:
        return Earlier({}, "")
    now = set(names)
    others = [n for n in found if n not in now]
    recorded = _recorded(out)
    course = batch["course"]
    if recorded is None or recorded["course"]["sha256"] != course["sha256"]:
        if recorded is None:
            what = f"an older grader's batch with no readable {BATCH_FILE}, whose course is unknown"
        else:
            where = untrusted.one_line(str(recorded.get("config") or "the shipped course"), 300)
            what = f"a batch graded against another course, {course_shown(recorded['course'])} from {where}"
        if others:
            raise ShardlabError(
                f"{out} holds {what}, and this run ({course_shown(course)}) does not grade {len(others)} of its "
                f"{len(found)} submissions ({_names(others)}): their rows would be lost from gradebook.csv and "
                f"written/. To re-grade some students of that batch, give its own course's --config (the run "
                f"merges into it); otherwise grade into a new --out")
        return Earlier({}, f"{out} holds {what}; this run grades all {len(found)} of its submissions again "
                           f"against {course_shown(course)}, so every row is replaced")
    kept = {n: r for n in others if (r := _read(out / "results" / f"{n}.json")) is not None}
    unreadable = [n for n in others if n not in kept]
    again = len(now & set(found))
    note = (f"merging into {out} (same course): its {len(kept)} other submission(s) keep their rows as graded; "
            f"this run's {len(now)} " + (f"({again} already there: their rows are replaced) " if again else "")
            + f"join them: gradebook.csv and written/ hold all {len(kept) + len(now)}")
    if unreadable:
        note += f"; {len(unreadable)} unreadable result file(s) left out: {_names(unreadable)}"
    return Earlier(kept, note)
