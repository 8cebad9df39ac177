"""The course config's declarations (`reference.config.sections`): non-finite
numbers are refused by type, errors stay one line naming the key path, a
course's derived values are computed once, and docs/config.md is what the
declarations say (and covers every key the shipped courses write)."""
import tomllib

import pytest

from helpers import config_error, course_from_text
from shardlab.autograder.core import content
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.questions import part_points, plan, questions
from shardlab.reference.config import load_config
from shardlab.reference.config.docs import reference
from shardlab.reference.config.sections import SECTIONS, Section

pytestmark = pytest.mark.pure

DOCS = content.folder("reference").parent / "docs" / "config.md"
COURSES = [content.folder("reference") / "course.toml", content.folder("reference") / "courses" / "a100.toml",
           content.folder("reference").parent / "examples" / "tp-course" / "course.toml"]


@pytest.mark.parametrize("text, where", [
    ("[buckets]\nbandwidth = nan\n", "[buckets].bandwidth must be a finite number, got nan"),
    ("[buckets]\ncall_overhead_us = inf\n", "[buckets].call_overhead_us must be a finite number, got inf"),
    ("[buckets]\nbandwidth = -inf\n", "[buckets].bandwidth must be a finite number, got -inf"),
    ("[model]\nd_model = inf\n", "[model].d_model must be a whole number, got inf"),
    ("[pipeline]\nmicrobatches = nan\n", "[pipeline].microbatches must be a whole number, got nan"),
    ('[hardware."X"]\ncapacity_bytes = 1e9\nflops_per_second = inf\n',
     '[hardware."X"].flops_per_second must be a finite number, got inf'),
    ('[network."N"]\nalpha_seconds = nan\nbeta_bytes_per_second = 1e10\ndevices = 4\n',
     '[network."N"].alpha_seconds must be a finite number, got nan'),
    ('[points]\n"1.8" = nan\n', '[points]."1.8" must be a finite number >= 0, got nan'),
    ("[points]\nmemory = inf\n", '[points]."memory" must be a finite number >= 0, got inf'),
    ("[course]\nsecret = 's'\n[variants]\nbuckets.bandwidth = [1e10, nan]\n",
     "[variants] buckets.bandwidth[1] must be a finite number, got nan"),
    ("[course]\nsecret = 's'\n[variants]\nbuckets.bandwidth = { min = 1e10, max = inf }\n",
     "[variants] buckets.bandwidth.max must be a finite number, got inf"),
    ("[course]\nsecret = 's'\n[variants]\nmodel.ffn_ratio = [4, inf]\n",
     "[variants] model.ffn_ratio[1] must be a finite number, got inf"),
])
def test_non_finite_numbers_are_refused_naming_the_key(tmp_path, text, where):
    # each of these loaded before the declarations (and [points] nan then asked Gradescope for nan points)
    with pytest.raises(ShardlabError) as err:
        course_from_text(tmp_path, text)
    assert str(err.value) == f"config {where}"


@pytest.mark.parametrize("text, message", [
    ("[memory]\ntokens_per_device = '4096'\n", "config [memory].tokens_per_device must be an integer, got '4096'"),
    ("[memory]\ntokens_per_device = true\n", "config [memory].tokens_per_device must be an integer, got True"),
    ("[comm4d]\noverlap = 1\n", "config [comm4d].overlap must be true or false, got 1"),
    ("[comm4d]\nx = 0\n", "config [comm4d].x must be positive, got 0"),
    ("[course]\nquestions = 'memory'\n", "config [course].questions must be a list of strings, got 'memory'"),
    ("[course]\nname = 3\n", "config [course].name must be a string, got 3"),
    ("[memory]\nwidth = 3\n", "config has an unknown key [memory].width (known: tokens_per_device, gpu, fsdp_device)"),
    ("[memroy]\ngpu = 'H100'\n", "config has an unknown section [memroy]"),
    ("memory = 3\n", "config [memory] must be a table"),
    ('[gradescope]\ntest_visibility = "soon"\n', "config [gradescope].test_visibility must be one of 'hidden', "
                                                 "'after_due_date', 'after_published', 'visible', got 'soon'"),
    ("[grading]\nrequire_walls = 'full'\nrequire_jail = true\n", "sets both require_walls and require_jail"),
    ("[pipeline]\nstages = 4\n", "config [pipeline].stages x chunks = 4 x 3 must divide [model].num_blocks = 126"),
])
def test_errors_are_one_line_naming_the_key_and_what_is_allowed(tmp_path, text, message):
    assert message in config_error(tmp_path, text)


def test_require_jail_is_still_read_as_the_walls_it_meant(tmp_path):
    assert course_from_text(tmp_path, "[grading]\nrequire_jail = true\n").grading.require_walls == "full"
    assert course_from_text(tmp_path, "[grading]\nrequire_jail = false\n").grading.require_walls == "isolated"
    assert load_config().grading.require_walls == "isolated"


def test_every_section_read_is_its_declaration_with_the_toml_names(tmp_path):
    cfg = course_from_text(tmp_path,
                           "[buckets]\ncall_overhead_us = 62.5\n[comm4d]\nx = 8\n[memory]\nfsdp_device = 'H200'\n")
    for name, declared in SECTIONS.items():
        if name != "model":                     # [model] is read into the reference's ModelConfig
            assert isinstance(getattr(cfg, name), declared)
    assert cfg.buckets.call_overhead_us == 62.5 and cfg.buckets.call_overhead_seconds == 62.5e-6
    assert cfg.comm4d.x == 8 and cfg.comm4d.n == 8 * 4
    assert cfg.memory.fsdp_device.name == "H200" and cfg.fsdp.device.name == "H100"   # two keys, two devices


def test_a_course_is_derived_once_and_read_from_there(tmp_path):
    cfg = course_from_text(tmp_path, '[course]\nquestions = ["memory"]\n[points]\nmemory = 20\n')
    first = plan(cfg)
    assert plan(cfg) is first and questions(cfg) is first.questions
    assert [q.module for q in first.questions] == ["memory"]
    # the auto parts of question 1 scaled to sum to 20: their points are read from the plan
    assert sum(part_points(p, cfg) for q in first.questions for p in q.parts
               if p.kind == "auto" and not p.bonus) == pytest.approx(20)
    assert first.points == {p.id: part_points(p, cfg) for p in first.questions[0].parts}


def test_the_config_reference_is_what_the_declarations_say():
    # regenerate with: .venv/bin/python -m shardlab.reference.config.docs > docs/config.md
    assert DOCS.read_text(encoding="utf-8") == reference()


@pytest.mark.parametrize("course", COURSES, ids=lambda p: p.parent.name + "/" + p.name)
def test_every_key_the_shipped_courses_write_is_in_the_config_reference(course):
    text = DOCS.read_text(encoding="utf-8")
    data = tomllib.loads(course.read_text(encoding="utf-8"))
    for section, table in data.items():
        if section in ("points", "variants"):
            assert f"## [{section}]" in text
            continue
        if section in ("hardware", "network"):
            heading, table = f'## [{section}."NAME"]', next(iter(table.values()))
        else:
            heading = f"## [{section}]"
        assert heading in text, heading
        body = text.split(heading, 1)[1].split("\n## ", 1)[0]
        for key in table:
            assert f"| `{key}` |" in body, f"{heading} {key}"


def test_a_new_setting_is_one_declaration(tmp_path):
    # what a newcomer writes: one field; its check, its one-line error and its row follow from it
    from shardlab.reference.config.docs import section_table
    from shardlab.reference.config.fields import Whole, setting
    from shardlab.reference.config.sections import read

    class Extra(Section):
        """[extra]: a setting a newcomer adds."""
        warmup_steps: Whole = setting(10, "steps before timing", unit="steps", gt=0)

    assert read(Extra, {}, "[extra]", {}).warmup_steps == 10          # type: ignore[attr-defined]
    assert read(Extra, {"warmup_steps": 2e1}, "[extra]", {}).warmup_steps == 20  # type: ignore[attr-defined]
    with pytest.raises(ShardlabError, match=r"^config \[extra\]\.warmup_steps must be positive, got 0$"):
        read(Extra, {"warmup_steps": 0}, "[extra]", {})
    assert "| `warmup_steps` | integer | steps | > 0 | `10` | steps before timing |" in section_table("extra", Extra)
