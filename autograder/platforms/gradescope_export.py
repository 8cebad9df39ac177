"""Re-grading a class from Gradescope: `shardlab grade --gradescope-export
ARCHIVE --out DIR` reads Gradescope's "Export Submissions" archive, grades
every submission with `platforms.batch`, and writes DIR/gradescope_scores.csv
(one row per student). It also holds the digest that ties a grading inside
the otter zip to the autograder zip it ran from (`autograder_zip_sha256`).

Gradescope does not document the export, so its layout (a
`submission_metadata.yml` of Ruby-flavoured YAML and one `submission_<id>/`
folder per submission) is taken from public code that reads real exports,
and `parse_metadata` refuses any other shape in one line. Each submission is
graded by `batch.grade_many` like any upload, with the same size, path and
link checks. The CSV copies the first columns of Gradescope's own "Download
Grades" CSV, one row per member of a group; a submission the grader failed
on gets no score rather than a wrong one, one it refused as not gradable
gets 0, as on Gradescope. The digest covers the zip's members, not its
bytes, because Gradescope keeps only the unpacked copy, /autograder/source.

Whose variant answers.toml is graded against is decided as on Gradescope:
each submission's child grader is given a submission_metadata.json in
Gradescope's shape naming the export's submitters (`gradescope_metadata`),
and the roster map the autograder zip ships (`answer_sheet.ROSTER_FILE`,
rebuilt by the caller from the same roster), so the same
`answer_sheet.gradescope_submitters` decides; answers.toml's student_id only
chooses among a group's members. The CSV then flags each row whose score
differs from the score Gradescope recorded in the export (`FLAG_COLUMNS`).

(research notes: docs/gradescope.md)
"""
from __future__ import annotations

import contextlib
import csv
import fnmatch
import hashlib
import io
import json
import math
import os
import re
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Iterator

import yaml

from shardlab.autograder.core.results import grader_version, points_text
from shardlab.autograder.engine.submission import MAX_UNPACKED_BYTES, MAX_ZIP_MEMBERS
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.sandbox.untrusted import one_line

METADATA = "submission_metadata.yml"
SUBMISSION_KEY = re.compile(r"submission_([A-Za-z0-9_-]+)")
SCORES_FILE = "gradescope_scores.csv"
SCORE_COLUMNS = ("Name", "SID", "Email", "Total Score", "Max Points", "Status", "Submission ID")
# after SCORE_COLUMNS: the export's :score:, whether the regraded Total Score differs from it ("yes", "no",
# "" when either is missing) and why (the questions whose scores changed)
FLAG_COLUMNS = ("Gradescope Score", "Differs", "Reason")
SCORE_TOLERANCE = 0.005                # below half of the hundredth Gradescope shows: the same score
METADATA_JSON = "submission_metadata.json"   # what Gradescope gives the autograder, one per submission
NOISE = ("__MACOSX", ".")              # macOS's resource forks, hidden files: never an export's own

# what an otter autograder zip holds (`publish.otter_export`), counted in autograder_zip_sha256: these
# files at its top and everything under these folders; nothing setup.sh adds to /autograder/source
# (mamba_install.sh, the shardlab-cache/ folder `shardlab warm` fills)
AUTOGRADER_FILES = ("run_autograder", "run_otter.py", "setup.sh", "environment.yml", "otter_config.json",
                    "requirements.*", "shardlab-*.whl", "shardlab-*.toml", "shardlab-*.csv")
AUTOGRADER_TREES = ("tests", "files")
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Submitter:
    """One student of a submission, as the export names them ("" when absent)."""

    name: str
    sid: str
    email: str


@dataclass(frozen=True)
class ExportedSubmission:
    """One entry of submission_metadata.yml: `key` is its folder
    (`submission_<id>`), `score` Gradescope's score for it (None if absent)."""

    key: str
    id: str
    submitters: tuple[Submitter, ...]
    created_at: str = ""
    score: float | None = None
    question_scores: tuple[tuple[str, float], ...] = ()   # (test name, score) of its :results:' tests

    def record(self, label: str, export_sha256: str | None, roster_sha256: str | None = None) -> dict:
        """What its result carries about where it came from (`label`: where it is in the export;
        `roster_sha256`: the roster map its students were identified through, None without one)."""
        return {"submission": label,
                "gradescope": {"submission_id": self.id, "created_at": self.created_at,
                               "submitters": [vars(s) for s in self.submitters],
                               "gradescope_score": self.score, "export_sha256": export_sha256,
                               "roster_map_sha256": roster_sha256}}


@dataclass
class Export:
    """An opened export: its submissions, the path to grade for each and
    where that is in the export (both by key), those refused before grading
    ({path: reason}), and the sha256 of the archive (a zip; None for an
    unpacked folder)."""

    submissions: list[ExportedSubmission]
    paths: dict[str, str]
    labels: dict[str, str]
    refused: dict[str, str] = field(default_factory=dict)
    sha256: str | None = None
    workdir: Path | None = None        # a temporary folder for what the grading needs (open_export's)

    def records(self, roster_map: str | None = None) -> dict[str, dict]:
        """{path to grade: what its result carries about the export} (batch.grade_many's annotations)."""
        digest = hashlib.sha256(roster_map.encode()).hexdigest() if roster_map is not None else None
        return {self.paths[s.key]: s.record(self.labels[s.key], self.sha256, digest) for s in self.submissions}

    def grading_args(self, cfg, roster_map: str | None = None,
                     user_ids: dict[str, str] | None = None) -> dict[str, list[str]]:
        """{path to grade: the options its child grader gets} (batch.grade_many's child_args):
        `--gradescope-metadata` (its submitters, `gradescope_metadata`) and, with a roster map
        (ROSTER_FILE's text), `--roster-map`, both written under `workdir`. See `gradescope_metadata`
        for `user_ids`; ShardlabError when the course's student_id_field cannot be read off the export."""
        assert self.workdir is not None, "open the export with open_export"
        check_identifiable(cfg, user_ids)
        extra = []
        if roster_map is not None:
            from shardlab.autograder.engine.answer_sheet import ROSTER_FILE
            (self.workdir / ROSTER_FILE).write_text(roster_map, encoding="utf-8")
            extra = ["--roster-map", str(self.workdir / ROSTER_FILE)]
        args = {}
        for sub in self.submissions:
            meta = self.workdir / f"{sub.key}.{METADATA_JSON}"
            meta.write_text(json.dumps(gradescope_metadata(sub, user_ids), indent=1), encoding="utf-8")
            args[self.paths[sub.key]] = ["--gradescope-metadata", str(meta), *extra]
        return args


# ---- what the autograder is given on Gradescope, rebuilt from the export ----

def gradescope_metadata(sub: ExportedSubmission, user_ids: dict[str, str] | None = None) -> dict:
    """The submission_metadata.json Gradescope gave the autograder for `sub`,
    as far as the export tells it: its id, time and `users`, one per submitter
    with their `email` and `name` (those they have). The export has no
    Gradescope user id (its :sid: is the roster's SID, another number), so a
    user's `id` is there only when `user_ids` ({email, case-folded: user id})
    knows their email."""
    users = []
    for s in sub.submitters:
        user = {k: v for k, v in (("email", s.email), ("name", s.name)) if v}
        uid = (user_ids or {}).get(s.email.casefold()) if s.email else None
        if uid:
            user["id"] = uid
        users.append(user)
    return {"id": sub.id, "created_at": sub.created_at, "users": users}


def check_identifiable(cfg, user_ids: dict[str, str] | None) -> None:
    """Refuse (one line) a re-grade that cannot identify students as
    Gradescope did: with a course secret and `[gradescope] student_id_field =
    "id"`, unless `user_ids` gives each email's Gradescope user id."""
    if cfg.course.secret and cfg.gradescope.student_id_field == "id" and user_ids is None:
        raise ShardlabError('[gradescope] student_id_field is "id", but Gradescope\'s export names submitters by '
                            "name, SID and email only, not the Gradescope user id the autograder read, so the "
                            "re-grade cannot tell whose variant answers.toml was graded against; give --roster "
                            "ROSTER.csv with an email column (its student ids are those user ids)")


def check_roster_resumable(out: Path, roster_map: str | None) -> None:
    """Refuse (one line) to resume into `out` when a result there identified
    its students through another roster map (or without one, or with one)."""
    digest = hashlib.sha256(roster_map.encode()).hexdigest() if roster_map is not None else None
    for path in sorted((out / "results").glob("*.json")):
        try:
            before = (json.loads(path.read_text(encoding="utf-8")).get("gradescope") or {})
        except (OSError, ValueError, AttributeError):
            continue                    # unreadable: batch's resume grades it again
        if isinstance(before, dict) and before.get("roster_map_sha256") != digest:
            raise ShardlabError(f"cannot resume {out}: {path.name} was graded with another --roster (or "
                                "with or without one), so its students were identified otherwise; resume "
                                "with the same --roster, or grade into a new --out")


# ---- submission_metadata.yml ----

def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"expected text, found {type(value).__name__}")


def _submitter(entry, where: str) -> Submitter:
    if not isinstance(entry, dict):
        raise ShardlabError(f"{where}: a submitter is not a mapping of :name:, :sid:, :email:")
    try:
        found = Submitter(_text(entry.get(":name")), _text(entry.get(":sid")), _text(entry.get(":email")))
    except ValueError as exc:
        raise ShardlabError(f"{where}: a submitter's :name:, :sid: or :email: is not text ({exc})") from None
    if not (found.name or found.sid or found.email):
        raise ShardlabError(f"{where}: a submitter has no :name:, :sid: or :email:")
    return found


def parse_metadata(text: str, shown: str) -> list[ExportedSubmission]:
    """The submissions of a submission_metadata.yml, in the file's order;
    ShardlabError (one line) for anything not shaped like Gradescope's."""
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        why = getattr(exc, "problem", None) or type(exc).__name__
        raise ShardlabError(f"{shown}: {METADATA} is not valid YAML{where}: {one_line(str(why), 200)}") from None
    if not isinstance(data, dict) or not data:
        raise ShardlabError(f"{shown}: {METADATA} holds no submissions (expected `submission_<id>:` entries "
                            "as Gradescope's 'Export Submissions' writes them)")
    found: list[ExportedSubmission] = []
    seen: dict[str, str] = {}                   # submitter -> the key of their submission
    for key, entry in data.items():
        m = SUBMISSION_KEY.fullmatch(key) if isinstance(key, str) else None
        if m is None:
            raise ShardlabError(f"{shown}: unexpected entry {one_line(repr(key), 80)} in {METADATA} "
                                "(expected submission_<id>)")
        where = f"{shown}: {key} in {METADATA}"
        if not isinstance(entry, dict) or not isinstance(entry.get(":submitters"), list):
            raise ShardlabError(f"{where} has no :submitters: list")
        submitters = tuple(_submitter(s, where) for s in entry[":submitters"])
        score = entry.get(":score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise ShardlabError(f"{where}: :score: is not a number")
        try:
            created = _text(entry.get(":created_at"))
        except ValueError:
            raise ShardlabError(f"{where}: :created_at: is not a time") from None
        for s in submitters:          # one active submission per student: two would give two scores
            who = (s.email or s.sid or s.name).lower()
            if who in seen:
                raise ShardlabError(f"{shown}: {one_line(s.email or s.sid or s.name, 80)} is a submitter "
                                    f"of both {seen[who]} and {key} in {METADATA}")
            seen[who] = key
        found.append(ExportedSubmission(key, m.group(1), submitters, created,
                                        None if score is None else float(score),
                                        _question_scores(entry.get(":results"))))
    return found


def _question_scores(results) -> tuple[tuple[str, float], ...]:
    """(name, score) of each test of an entry's :results: (the results.json
    Gradescope kept, one test per question); entries of any other shape are
    skipped: they only explain a difference, they never decide a score."""
    tests = results.get("tests") if isinstance(results, dict) else None
    return tuple((t["name"], float(t["score"])) for t in (tests if isinstance(tests, list) else [])
                 if isinstance(t, dict) and isinstance(t.get("name"), str)
                 and isinstance(t.get("score"), (int, float)) and not isinstance(t.get("score"), bool))


# ---- the archive: a zip or its unpacked folder ----

def _noise(name: str) -> bool:
    return name.startswith(NOISE)


def _zip_metadata(names: list[str], shown: str) -> str:
    """The member name of the export's metadata: at the zip's root or in its one top folder."""
    found = [n for n in names if not _noise(n)
             and (n == METADATA or (n.count("/") == 1 and n.endswith("/" + METADATA)))]
    if not found:
        raise ShardlabError(f"not a Gradescope export: {shown} holds no {METADATA} (Gradescope's "
                            f"'Export Submissions' zip has one beside its submission_<id>/ folders)")
    if len(found) > 1:
        raise ShardlabError(f"{shown} holds more than one {METADATA}: export one assignment at a time")
    return found[0]


def _is_plain_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _folder_metadata(folder: Path) -> Path | None:
    """The export's metadata in an unpacked folder: at its root or one folder down."""
    if (folder / METADATA).is_file():
        return folder / METADATA
    below = [p / METADATA for p in sorted(folder.iterdir())
             if not _noise(p.name) and _is_plain_dir(p) and (p / METADATA).is_file()]
    return below[0] if len(below) == 1 else None


def is_export(path: str | Path) -> bool:
    """Whether `path` looks like a Gradescope export (it holds submission_metadata.yml)."""
    path = Path(path)
    try:
        if path.is_dir():
            return _folder_metadata(path) is not None
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                _zip_metadata(zf.namelist(), str(path))
            return True
    except (OSError, zipfile.BadZipFile, ShardlabError):
        pass
    return False


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _split(zf: zipfile.ZipFile, members: list[tuple[zipfile.ZipInfo, str]], key: str,
           target: Path) -> str | None:
    """Write one submission's members ((info, name inside its folder)) to
    their own zip; the reason it is refused instead when it is bigger than
    any upload may be."""
    if len(members) > MAX_ZIP_MEMBERS:
        return f"submission {key} holds more than {MAX_ZIP_MEMBERS} files"
    if sum(info.file_size for info, _ in members) > MAX_UNPACKED_BYTES:
        return f"submission {key} unpacks to more than {MAX_UNPACKED_BYTES // 2**20} MiB"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        for info, name in members:
            copy = zipfile.ZipInfo(name, info.date_time)
            copy.external_attr = info.external_attr      # open_submission refuses links and devices by it
            if info.is_dir():
                out.writestr(copy, b"")
                continue
            with zf.open(info) as src, out.open(copy, "w") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    return None


def _open_zip(path: Path, workdir: Path) -> Export:
    shown = str(path)
    try:
        with zipfile.ZipFile(path) as zf:
            meta = _zip_metadata(zf.namelist(), shown)
            prefix = meta[:-len(METADATA)]
            subs = parse_metadata(zf.read(meta).decode("utf-8-sig", errors="replace"), shown)
            members: dict[str, list] = {s.key: [] for s in subs}
            folders = set()
            for info in zf.infolist():
                if not info.filename.startswith(prefix):
                    continue
                top, slash, inner = info.filename[len(prefix):].partition("/")
                folders.add(top if slash else None)
                if inner and top in members:
                    members[top].append((info, inner))
            missing = [s.key for s in subs if s.key not in folders]
            if missing:
                raise ShardlabError(f"{shown} lists {missing[0]} in {METADATA} but holds no folder "
                                    f"{missing[0]}/ (an incomplete download?)")
            paths, refused = {}, {}
            for sub in subs:
                target = workdir / f"{sub.key}.zip"
                paths[sub.key] = str(target)
                reason = _split(zf, members[sub.key], sub.key, target)
                if reason:
                    refused[str(target)] = reason
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as exc:
        raise ShardlabError(f"{shown} is a damaged zip file: {one_line(str(exc), 200)}") from None
    labels = {s.key: f"{path}:{prefix}{s.key}/" for s in subs}
    return Export(subs, paths, labels, refused, _sha256_file(path))


def _open_folder(folder: Path) -> Export:
    meta = _folder_metadata(folder)
    if meta is None:
        raise ShardlabError(f"not a Gradescope export: {folder} holds no {METADATA} (Gradescope's "
                            f"'Export Submissions' folder has one beside its submission_<id>/ folders)")
    subs = parse_metadata(meta.read_text(encoding="utf-8-sig", errors="replace"), str(folder))
    paths = {}
    for sub in subs:
        if not _is_plain_dir(meta.parent / sub.key):
            raise ShardlabError(f"{folder} lists {sub.key} in {METADATA} but holds no folder {sub.key}/")
        paths[sub.key] = str(meta.parent / sub.key)
    return Export(subs, paths, dict(paths))


@contextlib.contextmanager
def open_export(path: str | Path, workdir: Path) -> Iterator[Export]:
    """Open a Gradescope export (zip or unpacked folder). A zip is split into
    one zip per submission in a temporary folder under `workdir` (the
    Export's `workdir`, also there for an unpacked folder), removed on exit."""
    path = Path(path)
    if not path.exists():
        raise ShardlabError(f"no such file or folder: {path}")
    if path.is_dir():
        export = _open_folder(path)
    elif not zipfile.is_zipfile(path):
        raise ShardlabError(f"not a Gradescope export: {path} is neither a folder nor a zip file")
    workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".gradescope-export-", dir=workdir) as tmp:
        if not path.is_dir():
            export = _open_zip(path, Path(tmp))
        export.workdir = Path(tmp)
        yield export


# ---- the scores CSV ----

def _number(x: float) -> str:
    return points_text(x)


def _score(result: dict | None, maximum: str) -> tuple[str, str, str]:
    """(Total Score, Max Points, Status) of one graded submission."""
    if result is None:
        return "", maximum, "Ungraded"
    if result.get("status") == "ok":
        own_max = _number(result["max_score"])
        if result.get("internal_errors"):           # the grader's failure is never the student's score
            return "", own_max, "Ungraded"
        return _number(result["score"]), own_max, "Graded"
    if result.get("refused"):                        # not gradable: 0, as on Gradescope
        return "0", maximum, "Graded"
    return "", maximum, "Ungraded"


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0.0, abs_tol=SCORE_TOLERANCE)


def _flags(sub: ExportedSubmission, result: dict | None, total: str, test_name) -> tuple[str, str, str]:
    """(Gradescope Score, Differs, Reason) of one submission's rows: whether the
    regraded `total` differs from the export's :score:, and which questions'
    scores changed (by the test names of Gradescope's results.json,
    `test_name`), or "score differs" when that is unknown."""
    if sub.score is None:
        return "", "", "the export holds no Gradescope score"
    theirs = _number(sub.score)
    if not total:
        return theirs, "", "not regraded (see Status and gradebook.csv)"
    if _same(float(total), sub.score):
        return theirs, "no", ""
    said = f"regraded {total} vs Gradescope {theirs}: "
    if result is None or result.get("status") != "ok":
        return theirs, "yes", said + "not gradable: " + one_line(str((result or {}).get("error", "")), 160)
    gradescope = dict(sub.question_scores)
    changed = []
    for q in (result.get("questions", []) if test_name is not None else []):
        before = gradescope.get(test_name(q["id"], q["title"]))
        if before is not None and not _same(q["score"], before):
            who = q.get("student_id") if q["id"] == "answers" else None
            changed.append(f"question {q['id']} {_number(q['score'])} vs {_number(before)}"
                           + (f" (answers graded as {one_line(repr(who), 80)})" if isinstance(who, str) else ""))
    return theirs, "yes", said + ("; ".join(changed) if changed else "score differs")


def scores_csv(submissions: list[ExportedSubmission], results: dict[str, dict],
               test_name=None) -> tuple[str, list[str]]:
    """The CSV for Gradescope (one row per student) from {submission key:
    result}, and the keys of the submissions left without a score. Each row
    ends with FLAG_COLUMNS (`_flags`); `test_name(question id, title)`, the
    name of a question's test in Gradescope's results.json
    (`otter.question_file_title`, which imports this module), lets the Reason
    name the questions whose scores changed."""
    maxima = {_number(r["max_score"]) for r in results.values() if r.get("status") == "ok"}
    maximum = maxima.pop() if len(maxima) == 1 else ""
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(SCORE_COLUMNS + FLAG_COLUMNS)
    unscored = []
    for sub in submissions:
        total, points, status = _score(results.get(sub.key), maximum)
        if status != "Graded":
            unscored.append(sub.key)
        flags = _flags(sub, results.get(sub.key), total, test_name)
        for s in sub.submitters:
            w.writerow([s.name, s.sid, s.email, total, points, status, sub.id, *flags])
    return buf.getvalue(), unscored


def differing_students(text: str) -> int:
    """How many rows of a scores CSV (`scores_csv`) differ from Gradescope's score."""
    return sum(row.get("Differs") == "yes" for row in csv.DictReader(io.StringIO(text)))


# ---- the autograder zip's digest ----

def in_autograder_digest(name: str) -> bool:
    """A file of an otter autograder zip, by its path in the zip (or under /autograder/source)."""
    parts = name.split("/")
    if "__pycache__" in parts or name.endswith(".pyc"):
        return False
    if len(parts) == 1:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in AUTOGRADER_FILES)
    return parts[0] in AUTOGRADER_TREES


def _source_files(folder: Path) -> Iterator[tuple[str, Path]]:
    """(relative name, path) of the plain files of an unpacked autograder zip; links are not followed."""
    for entry in sorted(folder.iterdir()):
        if entry.is_symlink():
            continue
        if entry.is_file():
            yield entry.name, entry
        elif entry.is_dir() and entry.name in AUTOGRADER_TREES:
            for root, dirs, files in os.walk(entry):
                dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
                for f in files:
                    p = Path(root, f)
                    if not p.is_symlink():
                        yield p.relative_to(folder).as_posix(), p


def autograder_digest(path: str | Path) -> str | None:
    """autograder_zip_sha256 (see the module's docstring) of an autograder
    zip, or of its unpacked copy (/autograder/source); None when it holds
    none of an autograder zip's files."""
    path = Path(path)
    entries = {}
    if path.is_dir():
        for name, file in _source_files(path):
            if in_autograder_digest(name):
                entries[name] = _sha256_file(file)
    else:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.is_dir() and in_autograder_digest(info.filename):
                    digest = hashlib.sha256()
                    with zf.open(info) as f:
                        for chunk in iter(lambda: f.read(1 << 20), b""):
                            digest.update(chunk)
                    entries[info.filename] = digest.hexdigest()
    if not entries:
        return None
    total = hashlib.sha256()
    for name in sorted(entries):
        total.update(f"{name}\0{entries[name]}\n".encode())
    return total.hexdigest()


def zip_stamp(source: str | Path) -> dict:
    """The stamps of a grading inside the otter zip, whose unpacked copy is
    `source`: the grader's version and the zip's digest (None if unreadable)."""
    try:
        digest = autograder_digest(source)
    except (OSError, zipfile.BadZipFile):
        digest = None
    return {"grader_version": grader_version(), "autograder_zip_sha256": digest}
