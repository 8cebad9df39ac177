"""No input a student controls can abort a grading (issue 30, item 3).

A submission's files are parsed by the grader before and after any student
code runs: answers.toml (`engine.answer_sheet`), writeup.md
(`engine.writeup`), the upload's file and folder names and, for a zip, its
metadata (`engine.submission`). Each of these is generated here by
hypothesis, hostile as a student could make it (random bytes, nesting deep
enough to exhaust the parser's recursion, names that are no valid UTF-8 or
escape the folder, members claiming to be devices). Whatever comes in,
what comes back is a result for that item (a 0 with one sentence) or, for
an upload the grader refuses, one `ShardlabError` line: never another
exception, which would lose every other part of the grade.

The first attack, the one that was found: an answers.toml of 20,000 `[`.
"""
from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.results import QuestionResult
from shardlab.autograder.engine.answer_sheet import ANSWERS_FILE, grade_answers
from shardlab.autograder.engine.submission import open_submission
from shardlab.autograder.engine.writeup import WRITEUP_FILE, read_writeup, written_feedback
from shardlab.autograder.core import content
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

SECOND_COURSE = content.ROOT / "reference" / "courses" / "a100.toml"     # it has a secret: answers.toml is graded
FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                        HealthCheck.too_slow])

DEEP = [b"[" * 20_000, b"a = " + b"[" * 20_000, b"a = " + b"{b = " * 5_000, b"[" + b"a." * 50_000 + b"b]",
        b'student_id = "s001"\n[memory]\nx = ' + b"[" * 30_000]
# TOML-looking text: keys, tables, arrays and inline tables nested at random, values of every TOML type
_VALUE = st.recursive(st.one_of(st.integers(), st.floats(allow_nan=True), st.text(max_size=20), st.booleans(),
                                st.sampled_from(["1979-05-27T07:32:00Z", "inf", "nan", "0x1F", "1e400"])),
                      lambda inner: st.one_of(st.lists(inner, max_size=4).map(lambda v: f"[{', '.join(map(str, v))}]"),
                                              st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), inner,
                                                              max_size=3).map(
                                                  lambda d: "{" + ", ".join(f"{k} = {v}" for k, v in d.items())
                                                  + "}")),
                      max_leaves=20)
TOMLISH = st.lists(st.one_of(
    st.tuples(st.from_regex(r"[a-z_.\"]{1,12}", fullmatch=True), _VALUE).map(lambda kv: f"{kv[0]} = {kv[1]}"),
    st.from_regex(r"\[\[?[a-z_.]{0,12}\]\]?", fullmatch=True)), max_size=12).map("\n".join)


@pytest.fixture(scope="module")
def second_course():
    return load_config(SECOND_COURSE)


def _answers_graded(root: Path, cfg, raw: bytes) -> QuestionResult:
    (root / ANSWERS_FILE).write_bytes(raw)
    result = grade_answers(root, cfg, None)
    assert isinstance(result, QuestionResult)
    assert all(0 <= p.score <= p.max_score and isinstance(p.feedback, str) for p in result.parts)
    return result


@pytest.mark.parametrize("raw", DEEP, ids=["brackets", "nested-array", "nested-table", "long-key", "after-id"])
def test_deep_nesting_costs_the_answers_parts_only(tmp_path, second_course, raw):
    result = _answers_graded(tmp_path, second_course, raw)
    assert result.score == 0 and all(p.feedback.startswith("Not graded: answers.toml") for p in result.parts)
    assert all(len(p.feedback) < 300 for p in result.parts)


def test_an_oversized_answers_file_is_one_sentence(tmp_path, second_course):
    result = _answers_graded(tmp_path, second_course, b"# " + b"x" * 10_000_000)
    assert result.score == 0 and "larger than" in result.parts[0].feedback


@FUZZ
@given(raw=st.one_of(st.binary(max_size=2000), TOMLISH.map(str.encode),
                     st.text(max_size=500).map(lambda s: s.encode("utf-8", "surrogatepass"))))
def test_any_answers_toml_gives_a_result(tmp_path_factory, second_course, raw):
    _answers_graded(tmp_path_factory.mktemp("answers"), second_course, raw)


@FUZZ
@given(raw=st.one_of(st.binary(max_size=4000), st.text(max_size=2000).map(lambda s: s.encode("utf-8", "replace")),
                     st.lists(st.sampled_from(["## 1.a", "## ", "<!--", "-->", "\n", "x" * 50, "## 3.7 Why",
                                               "\r\n", "\x00", "<!-- x -->"]), max_size=300).map(
                                                   lambda parts: "".join(parts).encode())))
def test_any_writeup_gives_feedback(tmp_path_factory, raw):
    root = tmp_path_factory.mktemp("writeup")
    (root / WRITEUP_FILE).write_bytes(raw)
    sections = read_writeup(root)
    assert sections is None or all(isinstance(k, str) and isinstance(v, str) for k, v in sections.items())
    for part_id in ("1.a", "3.7", "5.e"):
        assert isinstance(written_feedback(part_id, sections, 2.0), str)


_NAMES = st.one_of(st.text(min_size=1, max_size=40), st.sampled_from([
    "assignments/", "assignments/memory.py", "kit/assignments/memory.py", "../escape.py", "/abs/path.py",
    "a/../../b", "assignments/\udcff.py", "a" * 300 + "/assignments/x.py", "assignments/./memory.py", "\x00",
    "__MACOSX/assignments/x", "answers.toml", "writeup.md", "a\\..\\..\\b"]))
_MEMBER = st.tuples(_NAMES, st.binary(max_size=200), st.integers(0, 0xFFFFFFFF), st.sampled_from(
    [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED]))


def _zip_bytes(members, corrupt_at: int | None, flip: int) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data, attr, method in members:
            info = zipfile.ZipInfo(name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
            info.external_attr, info.compress_type = attr, method
            zf.writestr(info, data)
    raw = bytearray(buffer.getvalue())
    if corrupt_at is not None and raw:          # a flipped byte: a bad CRC, header, name or deflate stream
        raw[corrupt_at % len(raw)] ^= flip or 1
    return bytes(raw)


@pytest.mark.filterwarnings("ignore:Duplicate name")     # two members of one name: one of the attacks
@FUZZ
@given(members=st.lists(_MEMBER, max_size=6), corrupt_at=st.none() | st.integers(0, 10_000),
       flip=st.integers(0, 255))
def test_any_zip_is_opened_or_refused_in_one_line(tmp_path_factory, members, corrupt_at, flip):
    path = tmp_path_factory.mktemp("zip") / "upload.zip"
    path.write_bytes(_zip_bytes(members, corrupt_at, flip))
    try:
        with open_submission(path) as root:
            assert (root / "assignments").is_dir()
    except ShardlabError as exc:         # NotASubmission among them: a 0 with this sentence
        assert "\n" not in str(exc) and len(str(exc)) < 600


@FUZZ
@given(names=st.lists(st.binary(min_size=1, max_size=30).filter(lambda b: b"/" not in b and b"\x00" not in b
                                                                and b not in (b".", b"..")), max_size=6))
def test_any_file_names_are_staged_or_refused_in_one_line(tmp_path_factory, names):
    """File names that are no valid UTF-8 (a student's own machine makes them) in a folder upload."""
    root = tmp_path_factory.mktemp("upload")
    (root / "assignments").mkdir()
    for name in names:
        (Path(bytes(root / "assignments")) / name if False else root / "assignments" / name.decode(
            "utf-8", "surrogateescape")).write_bytes(b"x = 1\n")
    try:
        with open_submission(root) as staged:
            assert (staged / "assignments").is_dir()
    except ShardlabError as exc:
        assert "\n" not in str(exc)
