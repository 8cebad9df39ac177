"""Per-student variants and answers.toml: same id same numbers, different ids
different numbers, each student's answers grade full marks only against
their own variant; bad roster or answers input is one line, no traceback."""
import dataclasses

import pytest

from shardlab.autograder.engine.answer_sheet import answer_sheet, grade_answers, read_answers, sheet_toml
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.engine.grading import grade_folder
from shardlab.autograder.engine.variants import check_student_id, variant_config
from shardlab.autograder.publish.roster import read_roster
from shardlab.reference.config import replaced
from helpers import run_cli

pytestmark = pytest.mark.platform

SECRET_TOML = '[course]\nsecret = "correct horse"\n'


@pytest.fixture(scope="module")
def secret_cfg(cfg):
    return replaced(cfg, {"course.secret": "correct horse"})


def test_no_secret_is_the_course(cfg, tmp_path):
    assert variant_config(cfg, "s001") is cfg
    assert grade_answers(tmp_path, cfg) is None


def test_variants_are_stable_and_distinct(secret_cfg):
    a, a2, b = (variant_config(secret_cfg, s) for s in ("s001", "s001", "s002"))
    assert a == a2 and a.model != b.model
    assert variant_config(replaced(secret_cfg, {"course.secret": "other"}), "s001").model != a.model


def test_without_a_variants_section_only_the_model_is_drawn_near_the_course(secret_cfg):
    """The shipped course (D = 16384, F = 53248, L = 126, p = 6 stages of v = 3 chunks): D and F
    within ±25 % in multiples of 128, so D in [12288, 20480] and F in [39936, 66560]; L within
    ±25 %, [95, 157], and a multiple of p·v = 18 for the pipeline: 108, 126 or 144. Nothing else moves."""
    seen = set()
    for sid in [f"s{i:03d}" for i in range(40)]:
        v = variant_config(secret_cfg, sid)
        m = v.model
        assert m.d_model % 128 == 0 and 12288 <= m.d_model <= 20480
        assert m.d_ff % 128 == 0 and 39936 <= m.d_ff <= 66560
        assert m.num_blocks in (108, 126, 144)
        assert m.name == f"FFN-L{m.num_blocks}-D{m.d_model}-F{m.d_ff}"
        assert dataclasses.replace(v, model=secret_cfg.model, source=secret_cfg.source) == secret_cfg
        assert all(w.value is not None for items in answer_sheet(v).values() for w in items.values())
        seen.add(m.num_blocks)
    assert seen == {108, 126, 144}


def test_a_courses_variants_section_says_what_is_drawn():
    """reference/courses/a100.toml draws D from 6144..10240 in steps of 1024, F = D · r rounded to
    128 with r in {4, 5.5, 6.5}, tokens, bandwidth and micro-batches from its lists; its A100s, its
    80 blocks and its 8 x 5 pipeline stay."""
    from shardlab.autograder.core import content
    from shardlab.reference.config import load_config
    course = load_config(content.folder("reference") / "courses" / "a100.toml")
    ratios = set()
    for sid in [f"u{i}" for i in range(30)]:
        v = variant_config(course, sid)
        assert v == variant_config(course, sid)
        m = v.model
        assert m.d_model in (6144, 7168, 8192, 9216, 10240) and m.num_blocks == 80
        ratio = next(r for r in (4, 5.5, 6.5) if m.d_ff == 128 * round(r * m.d_model / 128))
        ratios.add(ratio)
        assert v.memory.tokens_per_device in (1024, 2048) and v.pipeline.microbatches in (16, 32, 48)
        assert v.buckets.bandwidth in (1.25e10, 2.5e10, 5e10) and v.buckets.model_bytes == 280_000_000
        assert (v.memory.gpu.name, v.memory.fsdp_device.name, v.pipeline.device.name) == ("A100 40GB", "TPU v5e",
                                                                                          "A100")
        assert (v.pipeline.stages, v.pipeline.chunks) == (8, 5)
        assert v.points == course.points and v.course.questions == course.course.questions
        if m != course.model:
            assert m.name.startswith("FFN-") and "F70" not in m.name
    assert ratios == {4, 5.5, 6.5}


def test_a_range_nothing_can_be_drawn_from_is_one_line(tmp_path):
    """100 blocks never split into the shipped course's 6 stages x 3 chunks."""
    from shardlab.reference.config import load_config
    (tmp_path / "c.toml").write_text('[course]\nsecret = "s"\n[variants]\nmodel.num_blocks = [100, 101]\n')
    with pytest.raises(ShardlabError, match="no variant drawn from \\[variants\\] in 1000 tries") as err:
        variant_config(load_config(tmp_path / "c.toml"), "s001")
    assert "must divide [model].num_blocks" in str(err.value) and "\n" not in str(err.value)


def test_no_variant_makes_a_question_degenerate_that_the_course_does_not(tmp_path):
    """D = 4096, F = 16384, L = 32 on a 16 GB TPU v5e: half the activations, 32 · T · (4096 + 16384)
    bytes, is 2.68 GB at T = 4,096 tokens (FSDP fits) but 85.9 GB at T = 131,072 (no N fits: 1 (b)
    has no answer). Every variant therefore draws 4,096."""
    from shardlab.reference.config import load_config
    (tmp_path / "c.toml").write_text('[course]\nsecret = "s"\nquestions = ["memory"]\n'
                                     '[model]\nd_model = 4096\nd_ff = 16384\nnum_blocks = 32\n'
                                     '[memory]\nfsdp_device = "TPU v5e"\n'
                                     '[variants]\nmemory.tokens_per_device = [4096, 131072]\n')
    course = load_config(tmp_path / "c.toml")
    assert {variant_config(course, f"s{i}").memory.tokens_per_device for i in range(20)} == {4096}
    # the draw is real: 131,072 tokens is degenerate
    from shardlab.autograder.questions import degeneracies
    from shardlab.reference.config import with_values
    assert "memory" in degeneracies(with_values(course, {"memory.tokens_per_device": 131072}))


def _with_answers(tmp_path, text):
    """A submission root holding answers.toml (grade_answers reads nothing else)."""
    root = tmp_path / f"sub{len(list(tmp_path.iterdir()))}"
    root.mkdir()
    (root / "answers.toml").write_text(text)
    return root


def test_own_answers_full_marks_others_not(secret_cfg, tmp_path):
    for me, other in (("s001", "s002"), ("s002", "s001")):
        mine = sheet_toml(variant_config(secret_cfg, me), me, values=True)
        result = grade_answers(_with_answers(tmp_path, mine), secret_cfg)
        # one per question
        sections = len(answer_sheet(variant_config(secret_cfg, me))) * secret_cfg.course.answer_points
        assert result.score == result.max_score == sections, [p.feedback for p in result.parts]
        # the same numbers handed in under the other student's id: every question whose numbers
        # depend on the drawn model loses points; question 4's (s, w, o: not drawn here) are the same
        copied = mine.replace(f'student_id = "{me}"', f'student_id = "{other}"')
        result = grade_answers(_with_answers(tmp_path, copied), secret_cfg)
        theirs = answer_sheet(variant_config(secret_cfg, other))
        for part, (section, items) in zip(result.parts, answer_sheet(variant_config(secret_cfg, me)).items()):
            same = all(w.value == theirs[section][k].value for k, w in items.items())
            assert (part.score == part.max_score) == same, (section, part.feedback)
            assert same == (section == "q4")


def test_wrong_and_missing_numbers_named(secret_cfg, tmp_path):
    v = variant_config(secret_cfg, "s001")
    text = sheet_toml(v, "s001", values=True).replace(
        f"params = {answer_sheet(v)['q1']['params'].value}", "params = 'many'")
    result = grade_answers(_with_answers(tmp_path, text), secret_cfg)
    q1 = result.parts[0]
    assert q1.score < q1.max_score and "params: 'many' is not a number" in q1.feedback
    assert all(p.score == p.max_score for p in result.parts[1:])


def test_report_carries_answers_question(secret_cfg, submission):
    root = submission()
    (root / "answers.toml").write_text(sheet_toml(variant_config(secret_cfg, "s001"), "s001", values=True))
    report = grade_folder(root, secret_cfg, modules={"buckets"})
    assert [q.id for q in report.questions] == ["4"]      # a module subset: engine parts only
    (root / "answers.toml").unlink()
    result = grade_answers(root, secret_cfg)
    assert result.score == 0 and "no answers.toml" in result.parts[0].feedback


def test_bad_input_is_one_error(secret_cfg, tmp_path):
    bad = tmp_path / "bad.csv"
    for text, message in (("id,name\ns1,A\n", "columns student_id, name"),
                          ("student_id,name\ns 1,A\n", "line 2"),
                          ("student_id,name\ns1,A\ns1,B\n", "appears twice")):
        bad.write_text(text)
        with pytest.raises(ShardlabError, match=message):
            read_roster(bad)
    for text, message in (("student_id = [", "not valid TOML"), ("student_id = '../x'", "student id")):
        root = _with_answers(tmp_path, text)
        with pytest.raises(ShardlabError, match=message):
            read_answers(root / "answers.toml") if "TOML" in message else check_student_id("../x", "x")
        # when grading, the same one line is the feedback; the rest of the grade stands
        result = grade_answers(root, secret_cfg)
        assert result.score == 0 and all(message in p.feedback for p in result.parts)


def test_build_roster_cli(tmp_path):
    (tmp_path / "course.toml").write_text(SECRET_TOML)
    (tmp_path / "roster.csv").write_text("student_id,name\ns001,Ada\ns002,Grace\n")
    r = run_cli("build", "--config", "course.toml", "--roster", "roster.csv", "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    a = (tmp_path / "out/students/s001/handout.md").read_text()
    b = (tmp_path / "out/students/s002/handout.md").read_text()
    assert "for **Ada** (student id `s001`)" in a and 'student_id = "s001"' in a and a != b
    assert (tmp_path / "out/students/s002/handout.html").is_file()
    assert (tmp_path / "out/autograder.zip").is_file()
    (tmp_path / "plain.toml").write_text("[course]\nname = 'no secret'\n")
    for args, message in ((("--config", "plain.toml"), "needs a course secret"),
                          (("--config", "course.toml"), "not found")):
        r = run_cli("build", *args, "--roster", "nope.csv" if "course.toml" in args else "roster.csv",
                    "--out", "o2", cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr


def test_otter_export_carries_answers(secret_cfg, cfg):
    from shardlab.autograder.engine.answer_sheet import sheet_parts
    from shardlab.autograder.publish.otter_export import OtterCase, test_file_source
    assert sheet_parts(cfg) == []                          # no secret: no extra otter cases
    cases = [OtterCase(pid, title, secret_cfg.course.answer_points, False) for pid, title in sheet_parts(secret_cfg)]
    source = test_file_source("Question answers: Handout numbers for your variant", cases)
    compile(source, "qanswers.py", "exec")
    numbers = [key.removeprefix("q") for key in answer_sheet(secret_cfg)]       # the questions with numbers
    assert len(cases) == len(numbers)
    for n in numbers:
        assert f"@test_case(name='{n}.answers question {n} numbers (answers.toml)', points=1, " \
               f"hidden=False)" in source and f"check_part(shardlab_submission, '{n}.answers')" in source


def test_otter_handle_points_at_gradescope_metadata(tmp_path):
    from shardlab.autograder.platforms.otter import CONFIG_FILE, locate_submission
    ag = tmp_path / "autograder"
    (ag / "source").mkdir(parents=True)
    (ag / "source" / CONFIG_FILE).write_text(SECRET_TOML)
    (ag / "submission" / "assignments").mkdir(parents=True)
    assert locate_submission(ag / "submission")["metadata"] == str(ag / "submission_metadata.json")
