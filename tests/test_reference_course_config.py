"""A course's own config: its hardware and networks, numbers written as TOML
floats, a `[variants]` section checked when read, and the second course
shipped in reference/courses/. Expected numbers are derived here by hand."""
import math

import pytest

from helpers import config_error, course_from_text
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.questions import answer_key
from shardlab.autograder.core import content
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

A100_COURSE = content.folder("reference") / "courses" / "a100.toml"


def test_numbers_in_bytes_and_rates_may_be_toml_floats(tmp_path):
    cfg = course_from_text(tmp_path, "[buckets]\nmodel_bytes = 4e8\nbandwidth = 2.5e10\ncall_overhead_us = 62.5\n"
                          "[model]\nd_model = 8192.0\n")
    assert cfg.buckets.model_bytes == 400_000_000 and isinstance(cfg.buckets.model_bytes, int)
    assert cfg.buckets.bandwidth == 25_000_000_000
    assert cfg.buckets.call_overhead_seconds == pytest.approx(62.5e-6)
    assert cfg.model.d_model == 8192 and isinstance(cfg.model.d_model, int)


@pytest.mark.parametrize("text, message", [
    ("[model]\nd_model = 8192.5\n", "[model].d_model must be a whole number"),
    ("[buckets]\nmodel_bytes = 4.000000005e8\n", "[buckets].model_bytes must be a whole number"),
    ("[buckets]\nbandwidth = 'fast'\n", "[buckets].bandwidth must be a number"),
    ("[buckets]\nbandwidth = -1e9\n", "[buckets].bandwidth must be positive"),
])
def test_numbers_that_are_not_are_named(tmp_path, text, message):
    with pytest.raises(ShardlabError, match=message.replace("[", r"\[").replace("]", r"\]")):
        course_from_text(tmp_path, text)


def test_h200_is_a_preset(tmp_path):
    cfg = course_from_text(tmp_path, '[memory]\ngpu = "H200"\n')
    assert cfg.memory.gpu.capacity_bytes == 141 * 10**9
    # the shipped model: P = 2 · 16384 · 53248 · 126 = 219,848,638,464; 16 P = 3,517,578,215,424 bytes,
    # 24.95 H200s' worth: 25
    assert answer_key(cfg)["1"]["gpus_state"].value == 25


def test_a_course_defines_its_own_hardware_and_networks(tmp_path):
    cfg = course_from_text(tmp_path, """
[hardware."A100 40GB"]
capacity_bytes = 40e9
flops_per_second = 3.12e14
[hardware."Trillium"]
capacity_bytes = 32e9
flops_per_second = 9.18e14
ici_bytes_per_second = 1.8e11
ici_links = 4
[network."RoCE"]
alpha_seconds = 1e-5
beta_bytes_per_second = 2.5e10
devices = 16
[memory]
gpu = "A100 40GB"
[comm4d]
device = "Trillium"
m_x = 1            # a 2D torus (4 links) holds M_X + M_Y = 2 mesh axes
[fsdp]
inter_network = "RoCE"
""")
    assert cfg.memory.gpu.name == "A100 40GB" and cfg.memory.gpu.capacity_bytes == 40 * 10**9
    assert cfg.comm4d.device.ici_bytes_per_second == 1.8e11 and cfg.comm4d.device.ici_links == 4
    assert (cfg.fsdp.inter_network.alpha, cfg.fsdp.inter_network.beta, cfg.fsdp.inter_devices) == (1e-5, 2.5e10, 16)
    assert cfg.fsdp.intra_network.name == "intra-node" and cfg.fsdp.intra_devices == 8     # the preset's devices
    # 16 P = 3,517,578,215,424 bytes over 40 GB devices: 87.94, so 88
    assert answer_key(cfg)["1"]["gpus_state"].value == 88


@pytest.mark.parametrize("text, message", [
    ('[hardware."X"]\ncapacity_bytes = 1e9\n', 'needs flops_per_second'),
    ('[hardware."X"]\ncapacity_bytes = 1e9\nflops_per_second = 1e14\nhbm = 1\n', "unknown key"),
    ('[hardware."H100"]\ncapacity_bytes = 1e9\nflops_per_second = 1e14\n', "redefines the preset 'H100'"),
    ('[memory]\ngpu = "B200"\n', "[memory].gpu = 'B200' names no device"),
    ('[comm4d]\ndevice = "H100"\n', "names no device with ICI"),
    ('[network."N"]\nalpha_seconds = 1e-5\nbeta_bytes_per_second = 1e10\n[fsdp]\nintra_network = "N"\n',
     "[fsdp].intra_devices is needed"),
    ('[fsdp]\nintra_network = "NVL72"\n', "names no network"),
    ('hardware = 3\n', "[hardware] must hold tables"),
    # a v5e is a 2D torus (4 links, 2 axes): the default M_X + M_Y = 2 + 1 = 3 does not fit
    ('[comm4d]\ndevice = "TPU v5e"\n', "m_x + m_y = 2 + 1 mesh axes exceed the 2 axes of TPU v5e's torus"),
    # a v5p's 3 axes: 2 + 2 = 4 do not fit
    ('[comm4d]\nm_y = 2\n', "m_x + m_y = 2 + 2 mesh axes exceed the 3 axes of TPU v5p's torus"),
    # a chip of the course's own with ICI but no links given has no torus axes
    ('[hardware."T"]\ncapacity_bytes = 1e10\nflops_per_second = 1e14\nici_bytes_per_second = 1e11\n'
     '[comm4d]\ndevice = "T"\nm_x = 1\n', "exceed the 0 axes of T's torus (ici_links = 0, two per axis): "
     "lower m_x or m_y, or give the chip its ici_links"),
])
def test_bad_hardware_and_networks_are_named(tmp_path, text, message):
    assert message in config_error(tmp_path, text)


@pytest.mark.parametrize("text, message", [
    ('[course]\nquestions = ["memory"]\n[variants]\ncomm4d.x = [8, 16]\n',
     "draws for question 'comm4d', which this course does not set"),
    ('[variants]\nmodel.width = [1024]\n', "[variants] model.width is no key a variant can draw"),
    ('[variants]\nmodel.name = ["A"]\n', "no key a variant can draw"),
    ('[variants]\nmodel.d_model = []\n', "empty list"),
    ('[variants]\nmodel.d_model = { min = 9000, max = 8000 }\n', "min 9000 > max 8000"),
    ('[variants]\nmodel.d_model = { min = 8000 }\n', "must be a list or"),
    ('[variants]\nmemory.gpu = { min = 1, max = 2 }\n', "must be a list of values"),
    ('[variants]\nmemory.gpu = ["H100", "B200"]\n', "names no device"),
    ('[variants]\nmodel.d_ff = [4096]\nmodel.ffn_ratio = [4]\n', "draw one"),
    ('[variants]\nmodel.num_blocks = [12.5]\n', "must be a whole number"),
])
def test_bad_variants_are_named_when_read(tmp_path, text, message):
    assert message in config_error(tmp_path, text)


def test_the_second_course_reads_as_written():
    cfg = load_config(A100_COURSE)
    assert cfg.course.questions == ("pipeline", "memory", "buckets") and cfg.course.secret
    assert (cfg.memory.gpu.name, cfg.memory.fsdp_device.name, cfg.pipeline.device.name) == ("A100 40GB", "TPU v5e",
                                                                                         "A100")
    assert cfg.buckets.bandwidth == 2.5e10 and cfg.buckets.model_bytes == 280_000_000
    assert {d.key for d in cfg.draws} == {"model.d_model", "model.ffn_ratio", "memory.tokens_per_device",
                                          "buckets.bandwidth", "pipeline.microbatches"}
    key = answer_key(cfg)
    assert set(key) == {"1", "4", "5"}
    p = 2 * 8192 * 53248 * 80
    assert key["1"]["params"].value == p == 69_793_218_560
    assert key["1"]["gpus_state"].value == math.ceil(16 * p / 40e9) == 28
    # activations 80 · 2048 · (8192 + 53248) · 2 = 20,132,659,200 bytes; N > (2·16P + act) / (2·16e9 − act)
    act = 80 * 2048 * (8192 + 53248) * 2
    assert key["1"]["n_fsdp"].value == (2 * 16 * p + act) // (2 * 16 * 10**9 - act) + 1 == 190


def test_scaffolding_is_blank_or_guided(tmp_path):
    assert load_config().scaffolding == "blank"
    assert course_from_text(tmp_path, '[course]\nscaffolding = "guided"\n').scaffolding == "guided"
    with pytest.raises(ShardlabError, match=r"^config \[course\]\.scaffolding must be one of 'blank', 'guided', "
                                            r"got 'full'$"):
        course_from_text(tmp_path, '[course]\nscaffolding = "full"\n')


def test_the_torus_rule_binds_only_a_course_that_sets_question_3(tmp_path):
    """M_X + M_Y = 2 + 1 on a v5e (2 axes) is refused in a course that sets question 3 (above) and not in
    one that does not, as the pipeline's rule; 1 + 1 fits."""
    cfg = course_from_text(tmp_path, '[course]\nquestions = ["memory"]\n[comm4d]\ndevice = "TPU v5e"\n')
    assert (cfg.comm4d.m_x, cfg.comm4d.m_y) == (2, 1)
    assert course_from_text(tmp_path, '[comm4d]\ndevice = "TPU v5e"\nm_x = 1\n').comm4d.device.torus_axes == 2
