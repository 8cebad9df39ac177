"""A course of each kind an instructor brought (issue 47): a TPU-only one with a model the size of the
largest open models, and a small one on consumer GPUs over PCIe (tests/courses/); the third kind, a
course bringing a question with its own config section, is tests/test_reference_config_own_section.py's
and examples/tp-course's. Each reads without a warning, renders its handout and solutions, makes no
claim its numbers falsify (test_publish_claims.check_claims), and words its hardware as it is."""
from unittest import mock

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.publish import render
from shardlab.reference.config import load_config
from shardlab.reference.config.plausible import budget_warning, implausible
from test_publish_claims import check_claims

pytestmark = pytest.mark.pure

COURSES = content.ROOT / "tests" / "courses"


@pytest.mark.parametrize("name", ["tpu_only", "consumer_gpu"])
def test_a_course_of_each_kind_builds_its_documents_and_claims_nothing_false(name):
    cfg = load_config(COURSES / f"{name}.toml")
    assert implausible(cfg) == [] and budget_warning(cfg) is None
    with mock.patch.object(render, "document_figures", lambda cfg, solutions: {}):
        handout, solutions = render.render_markdown(cfg, False), render.render_markdown(cfg, True)
    for text in (handout, solutions):
        assert check_claims(cfg, text) == []
        assert "RTX 4090s" not in text and "TPU v5ps" not in text and "Trilliums" not in text
    if name == "tpu_only":
        assert "GPU run" not in handout      # nor a GPU run on a course of TPUs (a paper title may say GPU)
