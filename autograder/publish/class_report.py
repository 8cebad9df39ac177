"""The class report of a graded batch: what the class got wrong, where the
hidden cases caught what the public ones did not, the written sections left
empty, the submissions that look copied and what needs a re-grade, gathered
from the per-student results a batch folder already holds (OUT/results/*.json,
OUT/batch.json: `platforms.batch`).

`build(out)` writes OUT/class-report.json (SCHEMA_ID, for scripts and LMS
import), OUT/class-misconceptions.csv (one row per named misconception) and
OUT/class-report.html (`class_report_page`). `shardlab grade ... --out OUT`
calls it after grading, the Gradescope re-grade too, and `shardlab report OUT`
rebuilds it, after a re-grade merged into the folder as well: it reads only
what is there. docs/grading.md, "The class report", says what each section
counts; the conventions below are the instructor's choices the issue left open.

- A submission is *attempted* when it was graded ("ok") and held an
  assignments/ folder (no `no_submission`). Error rows and empty uploads are
  listed under operations, never counted as a class's mistakes.
- A part's full, partial and zero shares are over the attempted students
  whose part the grader did not fail on (an internal error is a re-grade, not
  a zero). A student at full marks of a bonus part is full.
- The public-vs-hidden gap of a part: students who pass every public case
  group of the part but lose at least one hidden group.
- A student losing points on a part has a *named cause* when one of the part's
  misconceptions explains a failed case (`PartResult.misconceptions`);
  otherwise the failures are their code failing (an exception, a hang, a
  crash: `PartResult.failures`) or a wrong value nobody has named. A part whose
  wrong values mostly have no named cause is where the next misconception
  belongs (code that failed is no misconception's to name).
- Reports from a grader before these fields existed count as "cause not
  recorded".

Similarity (`similarity`): each student's assignments/*.py are kept in
OUT/sources/<name>/ while the upload is still there (a Gradescope export's
folder is temporary), tagged with the submission's sha256, so a later rebuild
compares the code that was graded; writeup.md is compared from the results'
`written` answers.
"""
from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.results import BUDGET_STOP, INTERNAL_ERROR, grader_version
from shardlab.autograder.publish import similarity
from shardlab.autograder.sandbox import untrusted

SCHEMA_ID = "shardlab-class-report/1"
REPORT_JSON, REPORT_CSV, REPORT_HTML = "class-report.json", "class-misconceptions.csv", "class-report.html"
SOURCES, SOURCE_STAMP, PRINTS_FILE = "sources", "SUBMISSION_SHA256", "FINGERPRINTS.json"
MAX_SOURCE_BYTES = 1 << 20      # a kept .py file at most; longer files are cut (never executed, only read)
MAX_SOURCE_FILES = 64
HANG = untrusted.DID_NOT_FINISH
CODE_FAILED = (untrusted.RAISED, untrusted.CRASHED, untrusted.FAILED_TO_IMPORT, untrusted.DID_NOT_FINISH,
               untrusted.NOT_RUN, BUDGET_STOP)
WRONG = (untrusted.WRONG_VALUE, untrusted.WRONG_TYPE)
Progress = Callable[[str, int, int], None]       # (what, done, total)


def _quiet(what: str, done: int, total: int) -> None:
    """No progress shown."""


@dataclass
class Batch:
    """A batch folder's results by name (the gradebook's names), its batch.json (or {})."""

    out: Path
    results: dict[str, dict]
    batch: dict = field(default_factory=dict)

    @property
    def attempted(self) -> dict[str, dict]:
        return {n: r for n, r in self.results.items() if r.get("status") == "ok" and not r.get("no_submission")}


def _slim(record: dict) -> dict:
    """A result without what the report never reads (each part's feedback, the student's output),
    so a class of 600 fits in memory with room to spare."""
    record.pop("output", None)
    for q in record.get("questions") or []:
        for p in q.get("parts") or [] if isinstance(q, dict) else []:
            if isinstance(p, dict):
                p.pop("feedback", None)
                p.pop("timeline_note", None)
    return record


def load_batch(out: Path) -> Batch:
    """Read OUT/results/*.json and OUT/batch.json; a result file that cannot be
    read is an error row saying so. ShardlabError when OUT holds no results."""
    folder = Path(out) / "results"
    files = sorted(p for p in folder.glob("*.json") if not p.name.startswith(".")) if folder.is_dir() else []
    if not files:
        raise ShardlabError(f"{out} holds no results/*.json: grade into it first with "
                            f"`shardlab grade ... --out {out}`")
    results = {}
    for path in files:
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(record, dict) or "status" not in record:
                raise ValueError("not a result")
        except (OSError, ValueError) as exc:
            record = {"status": "error", "error": f"its result file is unreadable ({type(exc).__name__})"}
        results[path.stem] = _slim(record)
    try:
        batch = json.loads((Path(out) / "batch.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        batch = {}
    return Batch(Path(out), results, batch if isinstance(batch, dict) else {})


def _parts(record: dict):
    for q in record.get("questions", []):
        for p in q.get("parts", []):
            yield q, p


def _share(n: int, of: int) -> float:
    return round(n / of, 4) if of else 0.0


def _cause(part: dict) -> str:
    """Why a student lost points on a part: "named", "code failed", "wrong, unnamed" or "not recorded"."""
    if part.get("misconceptions"):
        return "named"
    failures = part.get("failures")
    if failures is None:
        return "not recorded"
    if any(kind in CODE_FAILED for kind in failures) and not any(kind in WRONG for kind in failures):
        return "code failed"
    return "wrong, unnamed"


def _gap(part: dict) -> bool:
    """Passes every public case group of the part and loses a hidden one."""
    groups = part.get("groups") or []
    public = [g for g in groups if g.get("public")]
    hidden = [g for g in groups if not g.get("public")]
    return bool(public) and bool(hidden) and all(g["score"] >= g["max_score"] for g in public) \
        and any(g["score"] < g["max_score"] for g in hidden)


def part_rows(batch: Batch) -> list[dict]:
    """One row per graded part (auto and answers-sheet parts), worst first: the
    lowest share at full marks, then the highest share at zero."""
    rows: dict[str, dict] = {}
    for name, record in batch.attempted.items():
        for q, p in _parts(record):
            if p.get("kind") not in ("auto", "answers"):
                continue
            row = rows.setdefault(p["id"], {"part": p["id"], "title": p.get("title", ""), "question": q.get("id", ""),
                                            "max_score": p.get("max_score", 0), "students": 0, "full": 0,
                                            "partial": 0, "zero": 0, "internal_errors": 0, "gap": 0,
                                            "gap_ids": [], "causes": Counter()})
            if p.get("status") == INTERNAL_ERROR:
                row["internal_errors"] += 1
                continue
            row["students"] += 1
            score, most = p.get("score", 0), p.get("max_score", 0)
            level = "full" if score >= most - 1e-9 else "zero" if score <= 1e-9 else "partial"
            row[level] += 1
            if level != "full":
                row["causes"][_cause(p)] += 1
            if _gap(p):
                row["gap"] += 1
                row["gap_ids"].append(name)
    out = []
    for row in rows.values():
        n = row["students"]
        causes = row.pop("causes")
        row.update(full_share=_share(row["full"], n), partial_share=_share(row["partial"], n),
                   zero_share=_share(row["zero"], n), gap_share=_share(row["gap"], n),
                   losing=row["partial"] + row["zero"], named_cause=causes["named"],
                   code_failed=causes["code failed"], wrong_unnamed=causes["wrong, unnamed"],
                   cause_not_recorded=causes["not recorded"])
        out.append(row)
    return sorted(out, key=lambda r: (r["full_share"], -r["zero_share"], _part_key(r["part"])))


def _part_key(part_id: str) -> tuple:
    return tuple((0, int(x), "") if x.isdigit() else (1, 0, x) for x in str(part_id).split("."))


def misconception_rows(batch: Batch) -> list[dict]:
    """Each named misconception: its part, its words as students saw them, how
    many attempted students it explains (count, and share of those graded on
    the part) and their names; most students first."""
    found: dict[tuple[str, str], dict] = {}
    graded: Counter = Counter()
    for name, record in batch.attempted.items():
        for _, p in _parts(record):
            if p.get("status") != INTERNAL_ERROR:
                graded[p["id"]] += 1
            for mis in p.get("misconceptions") or []:
                row = found.setdefault((p["id"], mis.get("name", "")),
                                       {"part": p["id"], "name": mis.get("name", ""),
                                        "words": mis.get("message", ""), "ids": []})
                if name not in row["ids"]:
                    row["ids"].append(name)
    rows = []
    for row in found.values():
        row["count"] = len(row["ids"])
        row["share"] = _share(row["count"], graded[row["part"]])
        row["ids"].sort()
        rows.append(row)
    return sorted(rows, key=lambda r: (-r["count"], _part_key(r["part"]), r["name"]))


def unexplained_parts(parts: list[dict]) -> list[dict]:
    """The parts whose wrong values mostly have no name: of the students who lost points there with a
    wrong value (named or not), fewer than half are explained by a named misconception. Code that
    failed (raised, hung) is counted beside them but decides nothing: no misconception names it."""
    rows = [{"part": r["part"], "title": r["title"], "losing": r["losing"], "named_cause": r["named_cause"],
             "wrong_unnamed": r["wrong_unnamed"], "code_failed": r["code_failed"],
             "cause_not_recorded": r["cause_not_recorded"], "unnamed_share": _share(r["losing"] - r["named_cause"],
                                                                                    r["losing"])}
            for r in parts if r["wrong_unnamed"] and r["named_cause"] < r["wrong_unnamed"]]
    return sorted(rows, key=lambda r: (-r["wrong_unnamed"], -r["losing"], _part_key(r["part"])))


def written_summary(batch: Batch) -> dict:
    """The written sections (manual parts): per section, how many attempted
    students answered it; and how many students answered 0, 1, ... of them."""
    sections: dict[str, dict] = {}
    answered_by_student = {}
    for name, record in batch.attempted.items():
        answers = record.get("written") or {}
        count = 0
        for _, p in _parts(record):
            if p.get("kind") != "manual":
                continue
            row = sections.setdefault(p["id"], {"part": p["id"], "title": p.get("title", ""),
                                                "answered": 0, "empty": 0, "empty_ids": []})
            if str(answers.get(p["id"]) or "").strip():
                row["answered"] += 1
                count += 1
            else:
                row["empty"] += 1
                row["empty_ids"].append(name)
        answered_by_student[name] = count
    ordered = sorted(sections.values(), key=lambda r: _part_key(r["part"]))
    histogram = Counter(answered_by_student.values())
    return {"sections": ordered, "total_sections": len(ordered),
            "students_by_sections_answered": {str(k): histogram.get(k, 0) for k in range(len(ordered) + 1)},
            "answered_by_student": answered_by_student}


def totals_summary(batch: Batch) -> dict:
    """The auto-graded totals of every graded submission (empty uploads' zeros included)."""
    graded = {n: r for n, r in batch.results.items() if r.get("status") == "ok"}
    scores = {n: float(r.get("score", 0)) for n, r in graded.items()}
    maxima = sorted({float(r.get("max_score", 0)) for r in graded.values()})
    values = sorted(scores.values())
    stats = ({"mean": round(statistics.fmean(values), 3), "median": round(statistics.median(values), 3),
              "min": values[0], "max": values[-1]} if values else {})
    return {"max_score": maxima[-1] if len(maxima) == 1 else None, "max_scores": maxima, "scores": scores, **stats}


def operations(batch: Batch) -> dict:
    """Error rows and their reasons, empty uploads, hangs, budget stops, internal errors and grading time."""
    errors, empty, hangs, budget, internal, seconds = [], [], [], [], [], {}
    for name, r in sorted(batch.results.items()):
        if r.get("status") != "ok":
            errors.append({"name": name, "reason": untrusted.one_line(str(r.get("error", "")), 300),
                           "refused": bool(r.get("refused"))})
            continue
        if r.get("no_submission"):
            empty.append({"name": name, "reason": untrusted.one_line(str(r["no_submission"]), 300)})
        hung = [p["id"] for _, p in _parts(r) if (p.get("failures") or {}).get(HANG)]
        stopped = [p["id"] for _, p in _parts(r) if (p.get("failures") or {}).get(BUDGET_STOP)]
        if hung:
            hangs.append({"name": name, "parts": hung})
        if stopped:
            budget.append({"name": name, "parts": stopped})
        if r.get("internal_errors"):
            internal.append({"name": name, "parts": [e.get("part", "") for e in r["internal_errors"]]})
        if isinstance(r.get("grading_seconds"), (int, float)):
            seconds[name] = float(r["grading_seconds"])
    times = sorted(seconds.values())
    timing = ({"measured": len(times), "median": round(statistics.median(times), 2),
               "p90": round(times[min(len(times) - 1, int(0.9 * len(times)))], 2), "max": round(times[-1], 2),
               "total": round(sum(times), 1),
               "slowest": [{"name": n, "seconds": s} for n, s in sorted(seconds.items(), key=lambda x: -x[1])[:5]]}
              if times else {"measured": 0})
    return {"error_rows": errors, "empty_uploads": empty, "hangs": hangs, "budget_stops": budget,
            "internal_errors": internal, "grading_seconds": timing, "seconds_by_student": seconds}


def provenance(batch: Batch) -> dict:
    """The course and grader(s) the results came from, and the grader that built this report."""
    courses = Counter(json.dumps(r.get("course") or {}, sort_keys=True) for r in batch.results.values()
                      if r.get("course"))
    versions = Counter(str(r.get("grader_version")) for r in batch.results.values() if r.get("grader_version"))
    course = batch.batch.get("course") or (json.loads(courses.most_common(1)[0][0]) if courses else {})
    return {"course": course, "config": batch.batch.get("config"),
            "courses": [json.loads(c) for c in sorted(courses)],
            "grader_versions": dict(sorted(versions.items())), "report_grader_version": grader_version()}


def summary(batch: Batch) -> dict:
    """Everything of class-report.json but the similarity (see `build`)."""
    parts = part_rows(batch)
    return {"schema": SCHEMA_ID, **provenance(batch),
            "submissions": len(batch.results), "attempted": len(batch.attempted),
            "totals": totals_summary(batch), "written": written_summary(batch), "parts": parts,
            "misconceptions": misconception_rows(batch), "unexplained_parts": unexplained_parts(parts),
            "operations": operations(batch)}


def misconceptions_csv(report: dict) -> str:
    """One row per named misconception: part, name, words, count, share, ids (space-separated)."""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["part", "misconception", "words", "count", "share", "ids"])
    for m in report["misconceptions"]:
        w.writerow([m["part"], m["name"], m["words"], m["count"], m["share"], " ".join(m["ids"])])
    return buf.getvalue()


# ---- the code each student submitted, kept for comparison ----

def read_sources(path: str | Path) -> dict[str, str]:
    """{file name: text} of the assignments/*.py of a submission (folder or zip),
    opened with the grader's own checks (`engine.submission`); each file read
    as text, at most MAX_SOURCE_BYTES, never run. {} when it has none."""
    from shardlab.autograder.engine.submission import NotASubmission, open_submission
    try:
        with open_submission(path) as root:
            files = sorted(p for p in (root / "assignments").glob("*.py")
                           if p.is_file() and not p.is_symlink() and p.name != "__init__.py")
            return {p.name: p.open("rb").read(MAX_SOURCE_BYTES).decode("utf-8", "replace")
                    for p in files[:MAX_SOURCE_FILES]}
    except (NotASubmission, ShardlabError, OSError):
        return {}


def kept_sources(out: Path, name: str, record: dict) -> dict[str, str] | None:
    """The code of `name`'s graded submission: OUT/sources/<name>/ when it was
    kept from the same bytes (its SOURCE_STAMP is the record's submission_sha256),
    else read again from the upload's path and kept, else None (gone or changed)."""
    folder = Path(out) / SOURCES / name
    digest = record.get("submission_sha256")
    try:
        if (folder / SOURCE_STAMP).read_text(encoding="utf-8").strip() == str(digest):
            return {p.name: p.read_text(encoding="utf-8", errors="replace") for p in sorted(folder.glob("*.py"))}
    except OSError:
        pass
    where = record.get("submission")
    if not where or not digest:
        return None
    from shardlab.autograder.platforms.batch import submission_sha256, write_atomic
    if submission_sha256(where) != digest:          # gone, or changed since it was graded
        return None
    files = read_sources(where)
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.py"):
        old.unlink()
    for file, text in files.items():
        write_atomic(folder / file, text)
    write_atomic(folder / SOURCE_STAMP, str(digest))
    return files


def _code_prints(job: tuple[str, dict[str, str]]) -> tuple[str, dict[int, list[int]]]:
    name, files = job
    return name, similarity.code_document(files).prints


def base_code(batch: Batch) -> dict[str, str]:
    """The course's stubs, the base code every student starts from: the shipped
    questions' for the course's scaffolding, and the course's own questions'
    (from batch.json's config; the shipped course's stubs when it cannot be read)."""
    from shardlab.autograder.publish.stubs import generated_stubs, own_stubs
    from shardlab.reference.config import load_config
    try:
        cfg = load_config(batch.batch.get("config"))
        return {**generated_stubs(cfg.course.scaffolding), **own_stubs(cfg, cfg.course.scaffolding)}
    except (ShardlabError, OSError):
        return generated_stubs()


PARALLEL_FROM = 40          # fingerprint a class of this many or more in worker processes


def _cache_key() -> str:
    """What a kept fingerprint file must have been made with to be used again."""
    return f"code k={similarity.CODE_K} w={similarity.CODE_W} {similarity.LEXER_VERSION}"


def cached_prints(out: Path, name: str, digest) -> dict[int, list[int]] | None:
    """The fingerprints kept beside OUT/sources/<name>/ for the submission `digest`, or None."""
    try:
        kept = json.loads((Path(out) / SOURCES / name / PRINTS_FILE).read_text(encoding="utf-8"))
        if kept["sha256"] == digest and kept["key"] == _cache_key():
            return {int(h): list(at) for h, at in kept["prints"]}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def code_documents(out: Path, sources: dict[str, dict[str, str]], digests: dict[str, str], jobs: int,
                   progress: Progress) -> dict:
    """{name: Document with its fingerprints only} of every student's code: those kept from an
    earlier build of the same bytes (PRINTS_FILE), the others computed, in `jobs` processes for a
    large class (forked: they need nothing but this module), and kept."""
    import multiprocessing
    from shardlab.autograder.platforms.batch import write_atomic
    docs = {}
    todo = []
    for name in sorted(sources):
        prints = cached_prints(out, name, digests[name])
        if prints is None:
            todo.append((name, sources[name]))
        else:
            docs[name] = similarity.Document(prints=prints)
    progress("fingerprinting code", len(docs), len(sources))
    mapped: Iterator[tuple[str, dict[int, list[int]]]]
    if len(todo) < PARALLEL_FROM or jobs < 2:
        mapped = map(_code_prints, todo)
        pool = None
    else:
        pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("fork"))
        mapped = pool.map(_code_prints, todo, chunksize=8)
    try:
        for name, prints in mapped:
            docs[name] = similarity.Document(prints=prints)
            kept = {"sha256": digests[name], "key": _cache_key(), "prints": list(prints.items())}
            write_atomic(Path(out) / SOURCES / name / PRINTS_FILE, json.dumps(kept))
            progress("fingerprinting code", len(docs), len(sources))
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return docs


def _shown_line(text: str) -> str:
    """A line of a student's file as the view shows it: its indentation kept (tabs as 4 spaces), the
    rest one clean line of at most 300 characters (`untrusted.one_line`)."""
    text = text.expandtabs(4)
    body = text.lstrip(" ")
    return " " * min(len(text) - len(body), 40) + untrusted.one_line(body, 300) if body.strip() else ""


def _view(files_a: dict[str, str], files_b: dict[str, str], marks_a: dict, marks_b: dict) -> list[dict]:
    """The side-by-side view of one pair: per file with a matching region on
    either side, both sides' lines, each [line number, text, marked]."""
    shown = []
    for file in sorted(set(marks_a) | set(marks_b)):
        sides = []
        for files, marks in ((files_a, marks_a), (files_b, marks_b)):
            lines = files.get(file, "").splitlines()
            sides.append([[k, _shown_line(text), k in marks.get(file, set())] for k, text in enumerate(lines, 1)])
        shown.append({"file": file, "a": sides[0], "b": sides[1]})
    return shown


def similar_pairs(batch: Batch, threshold: float, jobs: int = 2, progress: Progress = _quiet) -> dict:
    """The similarity section of the report: the method and its parameters, who
    could not be compared and why, and the flagged pairs (a < b, by name), each
    with both sides' code and writeup scores and its side-by-side view."""
    attempted = sorted(batch.attempted)
    sources: dict[str, dict[str, str]] = {}
    not_compared = []
    for k, name in enumerate(attempted, 1):
        files = kept_sources(batch.out, name, batch.results[name])
        if files:
            sources[name] = files
        else:
            not_compared.append(name)
        progress("reading code", k, len(attempted))
    base = similarity.code_document(base_code(batch))
    code_docs = code_documents(batch.out, sources, {n: str(batch.results[n].get("submission_sha256"))
                                                    for n in sources}, jobs, progress)
    code, code_out = similarity.pair_scores(code_docs, similarity.base_hashes(base, similarity.CODE_K))
    written = {n: {p: str(t) for p, t in (batch.results[n].get("written") or {}).items() if str(t).strip()}
               for n in attempted}
    word_docs = {n: similarity.words_document(w) for n, w in written.items() if w}
    words, words_out = similarity.pair_scores(word_docs, set())
    pairs = []
    chosen = sorted(p for p in set(code) | set(words)
                    if similarity.flagged(code.get(p), threshold) or similarity.flagged(words.get(p), threshold))
    for k, (a, b) in enumerate(chosen, 1):
        pairs.append(_pair(a, b, code.get((a, b)), words.get((a, b)), sources, written, code_out, words_out))
        progress("marking matching regions", k, len(chosen))
    pairs.sort(key=lambda p: -max(p["code_a"], p["code_b"], p["writeup_a"], p["writeup_b"]))
    return {"method": "Winnowing fingerprints (MOSS's method) over normalised Python tokens and writeup words",
            "threshold": threshold, "code_k": similarity.CODE_K, "code_window": similarity.CODE_W,
            "words_k": similarity.WORDS_K, "words_window": similarity.WORDS_W, "min_shared": similarity.MIN_SHARED,
            "compared": len(sources), "writeups_compared": len(word_docs), "not_compared": not_compared,
            "pairs": pairs}


def _pair(a: str, b: str, code, words, sources, written, code_out: set, words_out: set) -> dict:
    pair = {"a": a, "b": b, "code_a": 0.0, "code_b": 0.0, "code_shared": 0,
            "writeup_a": 0.0, "writeup_b": 0.0, "writeup_shared": 0, "code_view": [], "writeup_view": []}
    if code is not None:
        pair.update(code_a=round(code.score_a, 4), code_b=round(code.score_b, 4), code_shared=code.shared)
        da, db = similarity.code_document(sources[a]), similarity.code_document(sources[b])
        marks = similarity.matched_lines(da, db, code_out, similarity.CODE_K)
        pair["code_view"] = _view(sources[a], sources[b], *marks)
    if words is not None:
        pair.update(writeup_a=round(words.score_a, 4), writeup_b=round(words.score_b, 4),
                    writeup_shared=words.shared)
        da, db = similarity.words_document(written[a]), similarity.words_document(written[b])
        marks = similarity.matched_lines(da, db, words_out, similarity.WORDS_K)
        pair["writeup_view"] = _view(written[a], written[b], *marks)
    return pair


def build(out: Path, threshold: float = similarity.DEFAULT_THRESHOLD, jobs: int = 2,
          progress: Progress = _quiet) -> dict:
    """Write OUT's class-report.json, class-misconceptions.csv and
    class-report.html from the results there; returns the report. The JSON's
    `similar_pairs` holds the flagged pairs' names and scores; the views go
    only to the page."""
    from shardlab.autograder.platforms.batch import write_atomic
    from shardlab.autograder.publish.class_report_page import page
    if not 0 < threshold <= 1:
        raise ShardlabError(f"the similarity threshold is a share of fingerprints, in (0, 1]: got {threshold:g}")
    batch = load_batch(out)
    report = summary(batch)
    found = similar_pairs(batch, threshold, jobs, progress)
    views = {(p["a"], p["b"]): (p.pop("code_view"), p.pop("writeup_view")) for p in found["pairs"]}
    report["similarity"] = {k: v for k, v in found.items() if k != "pairs"}
    report["similar_pairs"] = found["pairs"]
    write_atomic(Path(out) / REPORT_JSON, json.dumps(report, indent=1, sort_keys=False))
    write_atomic(Path(out) / REPORT_CSV, misconceptions_csv(report))
    progress("drawing the page", 0, 1)
    write_atomic(Path(out) / REPORT_HTML, page(report, views))
    progress("drawing the page", 1, 1)
    return report
