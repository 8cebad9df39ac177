"""The class report (`publish.class_report`, `publish.similarity`): what a batch
folder's results add up to, checked on a class of five whose results are
written here by hand (every count below is derived from them, by hand), the
JSON against tests/class_report.schema.json, and the similarity of code
written here: a planted copy (renamed, reordered, re-commented) is found, an
honest pair that fills in the same stubs is not, and the report rebuilds after
a re-grade is merged into the folder."""
import csv
import json
import re
import shutil
from pathlib import Path

import jsonschema
import pytest

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.results import BUDGET_STOP
from shardlab.autograder.platforms.batch import submission_sha256
from shardlab.autograder.publish import class_report, similarity
from shardlab.autograder.publish.stubs import ASSIGNMENTS
from shardlab.autograder.sandbox import untrusted
from helpers import run_cli

HERE = Path(__file__).parent
SCHEMA = json.loads((HERE / "class_report.schema.json").read_text())
GIB = {"name": "GiB for GB", "message": "matches mixing GiB with GB"}


def filled(bodies_file: str) -> str:
    """assignments/memory.py with its k-th `raise NotImplementedError` replaced by the file's k-th body."""
    bodies = (HERE / "class_report" / bodies_file).read_text().split("---\n")
    stub = (ASSIGNMENTS / "memory.py").read_text()
    raises = re.findall(r"^ +raise NotImplementedError\(.*\)\n", stub, re.M)
    assert len(raises) == len(bodies) == 7
    for line, body in zip(raises, bodies):
        stub = stub.replace(line, body, 1)
    return stub


def copied(text: str) -> str:
    """What a copier does to a module: new names, the functions in reverse order, other comments."""
    for old, new in {"weights_per_block": "w_blk", "total": "acc", "bytes_each": "per_param_b",
                     "saved_per_token": "tok_b", "saved_per_block": "blk_b", "full": "n_dev",
                     "left_over": "remainder", "half_activations": "halfact", "shard": "piece",
                     "replicated": "rep", "sharded": "shd", "room": "free", "degree": "deg",
                     "optimizer": "opt_state"}.items():
        text = re.sub(rf"\b{old}\b", new, text)
    text = re.sub(r"#[^\n]*", "# my own work", text)
    head, *defs = re.split(r"\n(?=def )", text)
    return "\n".join([head, *reversed(defs)])


def submission(root: Path, name: str, memory: str, writeup: str | None = None) -> Path:
    folder = root / "uploads" / name
    shutil.copytree(ASSIGNMENTS, folder / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "assignments" / "memory.py").write_text(memory)
    return folder


def part(pid, score, most, groups=(), misconceptions=(), failures=None, status="ok", kind="auto"):
    p = {"id": pid, "title": f"task {pid}", "score": score, "max_score": most, "feedback": "", "kind": kind,
         "bonus": False, "status": status, "misconceptions": list(misconceptions),
         "groups": [{"name": n, "score": s, "max_score": m, "public": pub} for n, s, m, pub in groups]}
    if failures is not None:
        p["failures"] = failures
    return p


def record(path: Path | None, parts, written=None, seconds=None, **more) -> dict:
    r = {"status": "ok", "score": sum(p["score"] for p in parts), "max_score": 3.0,
         "questions": [{"id": "1", "title": "Memory", "parts": parts}], "written": written or {},
         "grader_version": "0.1.0+test", "course": {"name": "Test course", "sha256": "ab" * 32},
         "internal_errors": [], "no_submission": "", "grading_seconds": seconds}
    if path is not None:
        r.update(submission=str(path), submission_sha256=submission_sha256(path))
    r.update(more)
    return r


ADA_WRITEUP = ("Each device holds the whole training state at sixteen bytes a parameter, which is far more than "
               "one device can hold, so the model cannot train on a single device without sharding the state.")
BOB_WRITEUP = "I counted four FP32 copies per weight; the total is many times one GPU's capacity."


def class_of_five(tmp_path: Path) -> Path:
    """ada and bob write their own code; cy copies ada's (and her writeup); dee's grading
    failed; eve uploaded no code. The parts and their scores are chosen to exercise every count."""
    ada = submission(tmp_path, "ada", filled("ada_memory.txt"))
    bob = submission(tmp_path, "bob", filled("bob_memory.txt"))
    cy = submission(tmp_path, "cy", copied(filled("ada_memory.txt")))
    hidden_lost = [("other inputs", 0.5, 0.5, True), ("edge case", 0.0, 0.5, False)]
    results = {
        "ada": record(ada, [part("1.1", 2.0, 2.0, failures={}),
                            part("1.4", 0.5, 1.0, hidden_lost, [GIB], {"wrong value": 2}),
                            part("1.a", 0.0, 0.0, kind="manual")], {"1.a": ADA_WRITEUP}, 10.0),
        "bob": record(bob, [part("1.1", 0.0, 2.0, failures={untrusted.DID_NOT_FINISH: 2, untrusted.NOT_RUN: 3}),
                            part("1.4", 1.0, 1.0, failures={}),
                            part("1.a", 0.0, 0.0, kind="manual")], {"1.a": ""}, 30.0),
        "cy": record(cy, [part("1.1", 1.0, 2.0, [("other inputs", 0.0, 1.0, True), ("edge", 1.0, 1.0, False)],
                               failures={untrusted.WRONG_VALUE: 2, BUDGET_STOP: 1}),
                          part("1.4", 0.0, 1.0, status="internal-error"),
                          part("1.a", 0.0, 0.0, kind="manual")],
                     {"1.a": ADA_WRITEUP.replace("far more", "much more")}, 20.0,
                     internal_errors=[{"part": "1.4", "error": "the reference failed"}]),
        "dee": {"status": "error", "error": "grading took longer than 900 s", "grader_version": "0.1.0+test"},
        "eve": record(None, [part("1.1", 0.0, 2.0), part("1.4", 0.0, 1.0)], no_submission="no assignments/"),
    }
    out = tmp_path / "out"
    (out / "results").mkdir(parents=True)
    for name, r in results.items():
        (out / "results" / f"{name}.json").write_text(json.dumps(r))
    (out / "batch.json").write_text(json.dumps({"course": results["ada"]["course"], "config": None,
                                                "grader_version": "0.1.0+test"}))
    return out


@pytest.mark.pure
def test_the_class_of_five_adds_up_as_derived_by_hand(tmp_path):
    out = class_of_five(tmp_path)
    report = class_report.build(out)
    jsonschema.validate(report, SCHEMA)
    assert json.loads((out / class_report.REPORT_JSON).read_text()) == report
    assert (report["submissions"], report["attempted"]) == (5, 3)             # dee: error row, eve: no code
    # 1.1: ada full, cy partial, bob zero (a hang: his code failed); 1.4: bob full, ada partial, cy the grader's
    p11, p14 = report["parts"]                                                 # worst first: 1/3 full, then 1/2
    assert (p11["part"], p11["students"], p11["full"], p11["partial"], p11["zero"]) == ("1.1", 3, 1, 1, 1)
    assert (p11["gap"], p11["named_cause"], p11["code_failed"], p11["wrong_unnamed"]) == (0, 0, 1, 1)
    assert (p14["part"], p14["students"], p14["full"], p14["partial"], p14["internal_errors"]) == ("1.4", 2, 1, 1, 1)
    assert (p14["gap"], p14["gap_ids"], p14["gap_share"], p14["named_cause"]) == (1, ["ada"], 0.5, 1)
    assert report["misconceptions"] == [{"part": "1.4", "name": "GiB for GB", "words": GIB["message"],
                                         "ids": ["ada"], "count": 1, "share": 0.5}]
    assert [p["part"] for p in report["unexplained_parts"]] == ["1.1"]        # 1.4's one loser is named
    section = report["written"]["sections"][0]
    assert (section["answered"], section["empty"], section["empty_ids"]) == (2, 1, ["bob"])
    assert report["written"]["students_by_sections_answered"] == {"0": 1, "1": 2}
    assert sorted(report["totals"]["scores"]) == ["ada", "bob", "cy", "eve"]
    ops = report["operations"]
    assert [e["name"] for e in ops["error_rows"]] == ["dee"] and [e["name"] for e in ops["empty_uploads"]] == ["eve"]
    assert ops["hangs"] == [{"name": "bob", "parts": ["1.1"]}]
    assert ops["budget_stops"] == [{"name": "cy", "parts": ["1.1"]}]
    assert ops["internal_errors"] == [{"name": "cy", "parts": ["1.4"]}]
    assert (ops["grading_seconds"]["median"], ops["grading_seconds"]["max"]) == (20.0, 30.0)
    rows = list(csv.DictReader((out / class_report.REPORT_CSV).open()))
    assert rows == [{"part": "1.4", "misconception": "GiB for GB", "words": GIB["message"], "count": "1",
                     "share": "0.5", "ids": "ada"}]


@pytest.mark.pure
def test_a_planted_copy_is_found_and_an_honest_pair_from_the_same_stubs_is_not(tmp_path):
    out = class_of_five(tmp_path)
    report = class_report.build(out)
    assert [(p["a"], p["b"]) for p in report["similar_pairs"]] == [("ada", "cy")]
    pair = report["similar_pairs"][0]
    assert min(pair["code_a"], pair["code_b"]) >= similarity.DEFAULT_THRESHOLD
    assert min(pair["writeup_a"], pair["writeup_b"]) >= similarity.DEFAULT_THRESHOLD
    assert report["similarity"]["compared"] == 3 and report["similarity"]["not_compared"] == []
    # without the stubs left out, the honest pair would be flagged: what they share is the stubs
    docs = {n: similarity.code_document(class_report.kept_sources(out, n, json.loads(
        (out / "results" / f"{n}.json").read_text()))) for n in ("ada", "bob")}
    bare, _ = similarity.pair_scores(docs, set())
    assert similarity.flagged(bare[("ada", "bob")], similarity.DEFAULT_THRESHOLD)
    page = (out / class_report.REPORT_HTML).read_text()
    assert "evidence for a person to weigh, not a verdict" in page
    assert page.count('class="m"') >= 10                       # matching lines marked on both sides
    assert "<script" not in page and "http" not in page.split("</style>")[1].split("<svg")[0]


@pytest.mark.pure
def test_the_report_rebuilds_after_a_regrade_is_merged_into_the_folder(tmp_path):
    out = class_of_five(tmp_path)
    class_report.build(out)
    # cy rewrote her code and was graded again: a new result, new bytes; dee's error row is re-graded too
    cy = tmp_path / "uploads" / "cy"
    (cy / "assignments" / "memory.py").write_text(filled("bob_memory.txt").replace("FP32", "F32"))
    regraded = record(cy, [part("1.1", 2.0, 2.0, failures={}), part("1.4", 1.0, 1.0, failures={})],
                      seconds=12.0)
    (out / "results" / "cy.json").write_text(json.dumps(regraded))
    (out / "results" / "dee.json").write_text(json.dumps(record(None, [part("1.1", 2.0, 2.0, failures={})])))
    report = class_report.build(out)
    jsonschema.validate(report, SCHEMA)
    # her new code is bob's with a name changed: the rebuilt report compares what was graded last
    assert [(p["a"], p["b"]) for p in report["similar_pairs"]] == [("bob", "cy")]
    assert (out / "sources" / "cy" / "memory.py").read_text() == (cy / "assignments" / "memory.py").read_text()
    assert report["operations"]["error_rows"] == [] and report["operations"]["internal_errors"] == []
    assert report["attempted"] == 4


@pytest.mark.pure
def test_a_changed_upload_is_not_compared_and_a_folder_without_results_is_one_line(tmp_path):
    out = class_of_five(tmp_path)
    (tmp_path / "uploads" / "bob" / "assignments" / "memory.py").write_text("# changed after grading\n")
    report = class_report.build(out)
    assert report["similarity"]["not_compared"] == ["bob"]
    with pytest.raises(ShardlabError, match="holds no results"):
        class_report.build(tmp_path / "uploads")
    with pytest.raises(ShardlabError, match="threshold"):
        class_report.build(out, threshold=0)


@pytest.mark.platform
def test_shardlab_report_rebuilds_the_page_with_its_threshold(tmp_path):
    out = class_of_five(tmp_path)
    done = run_cli("report", str(out), "--threshold", "1")
    assert done.returncode == 0, done.stderr
    report = json.loads((out / class_report.REPORT_JSON).read_text())
    assert report["similarity"]["threshold"] == 1.0
    assert (out / class_report.REPORT_HTML).is_file()
    done = run_cli("report", str(tmp_path / "nowhere"))
    assert done.returncode != 0 and "Traceback" not in done.stderr and "no such folder" in done.stderr


@pytest.mark.pure
def test_fingerprints_are_kept_for_the_bytes_graded_and_redone_when_those_change(tmp_path):
    out = class_of_five(tmp_path)
    class_report.build(out)
    kept = out / "sources" / "cy" / class_report.PRINTS_FILE
    saved = json.loads(kept.read_text())
    saved["prints"] = []                        # a kept file is read, not redone: cy's code now shares nothing
    kept.write_text(json.dumps(saved))
    (pair,) = class_report.build(out)["similar_pairs"]          # flagged by the copied writeup alone
    assert (pair["code_shared"], pair["code_a"], pair["code_b"]) == (0, 0, 0)
    saved["sha256"] = "another upload's"        # kept for other bytes: redone, and the copy is found again
    kept.write_text(json.dumps(saved))
    (pair,) = class_report.build(out)["similar_pairs"]
    assert min(pair["code_a"], pair["code_b"]) >= similarity.DEFAULT_THRESHOLD
