"""Every number meaningful or warned about: implausible hardware and network numbers are warned
about naming the key (a unit slip: 80e6 for an 80 GB device), a model one of whose layers no device
of the course holds, a time budget too small for the solutions, and points shown with at most two
decimals where a sum of scaled points carries float noise. Bounds are the declarations'
(reference/config/sections.py); the numbers below are chosen by hand far outside them."""
import pytest

from shardlab.autograder.core.results import points_text
from shardlab.autograder.publish.otter_export import gradescope_points
from shardlab.reference.config import load_config
from shardlab.reference.config.plausible import MIN_BUDGET_SECONDS, budget_warning, implausible

pytestmark = pytest.mark.pure

SANE = '[hardware."Chip"]\ncapacity_bytes = 80e9\nflops_per_second = 1e15\n'


def _course(tmp_path, text):
    (tmp_path / "course.toml").write_text(text)
    return load_config(tmp_path / "course.toml")


def test_the_shipped_and_example_courses_are_plausible(tmp_path):
    assert implausible(load_config()) == [] and budget_warning(load_config()) is None
    assert implausible(_course(tmp_path, SANE + '[memory]\ngpu = "Chip"\n')) == []


@pytest.mark.parametrize("text, words", [
    ('[hardware."Chip"]\ncapacity_bytes = 80e6\nflops_per_second = 1e15\n',      # MB for GB
     '[hardware."Chip"].capacity_bytes = 8e+07 is implausible'),
    ('[hardware."Chip"]\ncapacity_bytes = 80e9\nflops_per_second = 1e18\n',      # more than any chip
     '[hardware."Chip"].flops_per_second = 1e+18 is implausible'),
    ('[network."Wire"]\nalpha_seconds = 5\nbeta_bytes_per_second = 1e10\ndevices = 8\n',   # ms for s
     '[network."Wire"].alpha_seconds = 5 is implausible'),
    ('[network."Wire"]\nalpha_seconds = 1e-5\nbeta_bytes_per_second = 1e15\ndevices = 8\n',
     '[network."Wire"].beta_bytes_per_second = 1e+15 is implausible'),
    # 2 · 262144 · 1048576 bytes = 549.8 GB per layer, more than a TPU v5p's 95 GB or an H100's 80 GB
    ('[model]\nd_model = 262144\nd_ff = 1048576\nnum_blocks = 18\n', "[model].d_model = 262144 and d_ff = 1048576"),
])
def test_an_implausible_number_is_warned_about_naming_its_key(tmp_path, text, words):
    found = implausible(_course(tmp_path, text))
    assert len(found) == 1 and words in found[0], found


def test_a_budget_too_small_for_the_solutions_is_warned_about(tmp_path):
    cfg = _course(tmp_path, "[grading]\nbudget_seconds = 5\n")
    assert "budget_seconds = 5 is too small for the solutions" in budget_warning(cfg)
    assert budget_warning(_course(tmp_path, f"[grading]\nbudget_seconds = {MIN_BUDGET_SECONDS}\n")) is None


def test_points_summed_from_scaled_parts_print_with_two_decimals_at_most(tmp_path):
    # question 1 scaled to 20 points: its parts become 20 · p / base each, whose float sum need not be 20
    cfg = _course(tmp_path, '[course]\nquestions = ["memory"]\n[points]\nmemory = 20\n')
    assert points_text(gradescope_points(cfg)) == "20"
    assert points_text(20.000000000000007) == "20" and points_text(2.142857) == "2.14"
