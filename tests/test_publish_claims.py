"""No template sentence the course's numbers can falsify: the handout and the solutions of many
random valid courses (hypothesis, `random_courses`) render, and each comparative claim they make is
checked against numbers derived here by hand from docs/spec.md:

- question 1 (b): P = 2·D·F·L parameters, the training state 16·P bytes, the activations
  act = L·T·(D + F)·2 bytes; the graded N is the smallest with (16P + act/2)/N + act/2 < capacity, and
  the headroom the rest of the device, compared with one layer's BF16 buffer, 2·D·F bytes;
- question 2: the inter-node network is called slower only when its β is below the intra-node one's.
"""
import math
import re
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings

from shardlab.autograder.publish import render
from shardlab.autograder.publish.render import render_markdown
from random_courses import course_texts, load_course

pytestmark = pytest.mark.pure


def headroom_layers(cfg) -> float | None:
    """The graded N's headroom in one-layer BF16 buffers (None: no N fits), by hand."""
    d, f, layers, t = cfg.model.d_model, cfg.model.d_ff, cfg.model.num_blocks, cfg.memory.tokens_per_device
    state, act, cap = 16 * 2 * d * f * layers, layers * t * (d + f) * 2, cfg.memory.fsdp_device.capacity_bytes
    if act / 2 >= cap:
        return None
    n = math.floor((2 * state + act) / (2 * cap - act)) + 1      # the smallest N: (16P + act/2)/N + act/2 < cap
    return (cap - ((state + act / 2) / n + act / 2)) / (2 * d * f)


def check_claims(cfg, text: str) -> list[str]:
    wrong = []
    layers = headroom_layers(cfg)
    if "less than one of those layers" in text and not (layers is not None and layers < 1):
        wrong.append(f"'less than one of those layers' with a headroom of {layers} layers")
    for k in re.findall(r"room for (\d) of those layers but not all three", text):
        if layers is None or int(k) != math.floor(layers) or not 1 <= layers < 3:
            wrong.append(f"'room for {k} of those layers' with a headroom of {layers} layers")
    if "room for all three of those layers" in text and not (layers is not None and layers >= 3):
        wrong.append(f"'room for all three' with a headroom of {layers} layers")
    slower = cfg.fsdp.inter_network.beta < cfg.fsdp.intra_network.beta
    if "inter-node network, a slower one" in text and not slower:
        wrong.append("the inter-node network called slower")
    return wrong


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(course_texts())
def test_every_claim_of_the_handout_and_solutions_holds_on_random_courses(text):
    cfg = load_course(text)
    assume(cfg is not None)
    with mock.patch.object(render, "document_figures", lambda cfg, solutions: {}):   # figures claim nothing:
        for solutions in (False, True):                                              # drawing them is slow
            assert check_claims(cfg, render.render_markdown(cfg, solutions)) == [], text


@pytest.mark.parametrize("d_model, d_ff, blocks, claim", [
    # by hand, on a TPU v5p (95e9 bytes), T = 4096 tokens:
    # D = 16384, F = 53248, L = 126 (the shipped model): 16P = 3,517,578,215,424, act = 126 · 4096 · 69632 · 2
    #   = 71,873,593,344; N = floor((7,035,156,430,848 + 71,873,593,344) / (1.9e11 − 71,873,593,344)) + 1 = 61;
    #   the headroom 95e9 − ((16P + act/2) / 61 + act/2) = 808,858,867 bytes, 0.46 of one layer (1,744,830,464)
    (16384, 53248, 126, "less than one of those layers"),
    # D = 1024, F = 4096, L = 18 (18 = 6 stages x 3 chunks): 16P = 2,415,919,104, act = 18 · 4096 · 5120 · 2
    #   = 754,974,720; N = floor((4,831,838,208 + 754,974,720) / (1.9e11 − 754,974,720)) + 1 = 1; the headroom
    #   95e9 − (2,415,919,104 + 377,487,360 + 377,487,360) = 91,829,106,176 bytes, 10,947 layers of 8,388,608
    (1024, 4096, 18, "room for all three of those layers"),
])
def test_the_headroom_sentence_follows_the_numbers(tmp_path, d_model, d_ff, blocks, claim):
    cfg = load_course(f"[model]\nd_model = {d_model}\nd_ff = {d_ff}\nnum_blocks = {blocks}\n")
    solutions = render_markdown(cfg, True)
    assert claim in solutions and check_claims(cfg, solutions) == []
