"""Question 3 (4D communication accounting): known answers worked out by hand
from docs/spec.md for the default course, both conventions; a mesh whose TP comms
can never hide; the part definitions' cases and misconceptions. Grading the
solutions and stubs is in test_question_comm4d.py."""
from fractions import Fraction

import pytest

from shardlab.autograder.core.parts import alternatives
from shardlab.autograder.engine.plan import part_rng
from shardlab.autograder.questions import questions
from shardlab.autograder.publish.render import render_markdown
from shardlab.reference import comm4d as ref
from shardlab.reference.config import load_config
from shardlab.solutions import comm4d as sol

pytestmark = pytest.mark.pure

IMPLEMENTATIONS = pytest.mark.parametrize("impl", [ref, sol], ids=["reference", "solutions"])

# The default course: D = 16384, F = 53248, L = 126; X = 16, Y = 4 (N = 64),
# M_X = 2, M_Y = 1; TPU v5p C = 4.6e14 FLOP/s = 4600e11, W_ici = 2 * 9e10 = 1.8e11.
D, F, X, Y, MX, MY, C, W = 16384, 53248, 16, 4, 2, 1, 4.6e14, 1.8e11
COURSE = (D, F, X, Y, C, W, MX, MY)

# Overlapped (max): T_math >= T_FSDP  <=>  4BDF/(XYC) >= 4DF/(Y W M_X)
#   <=>  B >= X C / (W M_X) = 16 * 4600e11 / (1.8e11 * 2) = 73600 / 3.6 = 184000 / 9
#        = 20,444.44 tokens; per chip B/64 = 2875/9 = 319.44; per data shard B/16 = 11500/9.
#   T_math >= T_TP for all B  <=>  F W M_Y >= Y C:  53248 * 1.8e11 = 9.58464e15 >= 1.84e15. Yes.
OVERLAP_B = Fraction(184000, 9)
# Summed: 4BDF/(XYC) >= 4DF/(Y W M_X) + 4BD/(X W M_Y); divide by 4D and multiply by
# X Y C W M_X M_Y:  B F W M_X M_Y >= X C F M_Y + B Y C M_X
#   <=>  B = X C F M_Y / (M_X (F W M_Y - Y C))
#        = 16 * 4600 * 53248 / (2 * (53248 * 1.8 - 4 * 4600))       (C, W in units of 1e11)
#        = 3,919,052,800 / (2 * (95,846.4 - 18,400)) = 3,919,052,800 / 154,892.8 = 25,301.71
SUMMED_B = Fraction(3_919_052_800) / Fraction("154892.8")


def close(got, want, rtol=1e-9):
    return abs(got - float(want)) <= rtol * abs(float(want))


@IMPLEMENTATIONS
def test_default_course_overlapped(impl):
    b = impl.min_batch_compute_bound(*COURSE)                 # overlap=True is the default
    assert close(b, OVERLAP_B) and close(b, 20444.444444, 1e-6)
    assert close(b / 64, Fraction(2875, 9)) and close(b / 64, 319.444444, 1e-6)   # tokens per chip
    assert close(impl.min_batch_compute_bound(*COURSE, True), OVERLAP_B)


@IMPLEMENTATIONS
def test_default_course_summed(impl):
    b = impl.min_batch_compute_bound(*COURSE, overlap=False)
    assert close(b, SUMMED_B) and close(b, 25301.7106, 1e-6)
    assert close(b / 64, SUMMED_B / 64) and close(b / 64, 395.3392, 1e-6)


@IMPLEMENTATIONS
def test_default_course_times_and_volumes(impl):
    # T_FSDP = 4 D F / (Y W M_X) = 4 * 16384 * 53248 / (4 * 1.8e11 * 2) = 3,489,660,928 / 1.44e12
    fsdp = Fraction(3_489_660_928) / Fraction(1_440_000_000_000)
    assert close(impl.fsdp_comm_seconds(D, F, Y, W, MX), fsdp)
    # at the overlapped threshold the math equals the FSDP comms exactly
    assert close(impl.math_seconds(float(OVERLAP_B), D, F, 64, C), fsdp)
    # T_TP = 4 B D / (X W M_Y) = 4 * (184000/9) * 16384 / (16 * 1.8e11) = 4.6522e-4 s
    tp = 4 * OVERLAP_B * 16384 / (16 * Fraction(180_000_000_000))
    assert close(impl.tp_comm_seconds(float(OVERLAP_B), D, X, W, MY), tp) and close(float(tp), 4.65223e-4, 1e-5)
    # forward FLOPs of 4096 tokens: 4 * 4096 * 16384 * 53248 * 126
    #   = 268,435,456 * 53,248 * 126 = 14,293,651,161,088 * 126
    assert impl.forward_flops(4096, D, F, 126) == 1_801_000_046_297_088
    # volumes at 320 tokens per chip, B = 20480: B/X = 1280, F/Y = 13312
    assert impl.block_collective_bytes(20480, D, F, X, Y) == {
        "allgather_in": 1280 * 16384 * 2,                   # 41,943,040
        "allgather_w_in": 16384 * 13312 * 2,                # 436,207,616
        "allgather_w_out": 13312 * 16384 * 2,
        "reducescatter_out": 1280 * 16384 * 2,
    }


@IMPLEMENTATIONS
def test_tp_never_hidden_gives_none(impl):
    # Y = 32, X = 2: Y C = 32 * 4.6e14 = 1.472e16 > F W M_Y = 9.58464e15, so the
    # TP comms grow faster than the math: no batch is large enough.
    assert impl.min_batch_compute_bound(D, F, 2, 32, C, W, MX, MY) is None
    assert impl.min_batch_compute_bound(D, F, 2, 32, C, W, MX, MY, False) is None


@IMPLEMENTATIONS
def test_tie_hides_when_overlapped_only(impl):
    # F W M_Y = 1024 * 1e11 = 4 * 2.56e13 = Y C exactly: math = TP at every B.
    # Overlapped: B = X C / (W M_X) = 8 * 2.56e13 / 1e11 = 2048. Summed: never.
    assert impl.min_batch_compute_bound(128, 1024, 8, 4, 2.56e13, 1e11, 1, 1) == 2048
    assert impl.min_batch_compute_bound(128, 1024, 8, 4, 2.56e13, 1e11, 1, 1, False) is None


def test_x_opt():
    # X_opt = sqrt(B N M_X / (F M_Y)); B = 53248 * 4 / (64 * 2) = 1664 makes it sqrt(4) = 2
    assert ref.optimal_fsdp_degree(1664, 64, F, 2, 1) == 2.0


def test_worked_answers_of_default_course(cfg):
    w = ref.worked(cfg)
    assert close(w["overlap_batch"].value, OVERLAP_B) and close(w["overlap_per_chip"].value, OVERLAP_B / 64)
    assert close(w["summed_batch"].value, SUMMED_B) and close(w["overlap_per_shard"].value, OVERLAP_B / 16)
    assert w["whole"].value == 20480                         # ceil(319.44) = 320 tokens per chip
    assert "319.4 tokens per chip" in w["overlap_per_chip"].shown


def test_config_where_tp_never_hides(tmp_path):
    path = tmp_path / "course.toml"
    path.write_text("[comm4d]\nx = 2\ny = 32\n")
    cfg = load_config(path)
    w = ref.worked(cfg)
    assert w["overlap_batch"].value is None and w["summed_batch"].value is None
    assert "times" not in w
    text = render_markdown(cfg, solutions=True)
    assert "no batch is large enough" in text


def test_summed_course_states_its_convention(tmp_path):
    path = tmp_path / "course.toml"
    path.write_text("[comm4d]\noverlap = false\n")
    text = render_markdown(load_config(path), solutions=True)
    assert "**Communication is summed**" in text and "25,301.7 tokens" in text


def test_handout_states_conventions_and_hides_answers(cfg):
    handout, key = render_markdown(cfg, solutions=False), render_markdown(cfg, solutions=True)
    for phrase in ("**Batch means tokens**", "**B/N is the batch per chip**",
                   "**B/X the batch per data shard**", "**Communication overlaps computation**"):
        assert phrase in handout
    assert "319.4 tokens per chip" in key and "20,444.4 tokens" in key and "**Rubric.**" in key
    assert "319.4" not in handout and "Rubric" not in handout


def _question(cfg):
    return next(q for q in questions() if q.number == 3)


def test_every_misconception_is_distinguishable(cfg):
    """Each detector's wrong answer differs from the right one on some case,
    so a submission making that mistake fails and can be told so."""
    for part in _question(cfg).parts:
        if part.kind != "auto":
            continue
        cases = part.cases(cfg, part_rng(cfg, part))
        assert any(c.public for c in cases) and any(not c.public for c in cases)
        for mis in part.misconceptions:
            assert any(not part.compare(part.expect(c)[0], mis.alt(c)[0]) for c in cases), (part.id, mis.name)


def test_cases_cover_none_and_both_conventions(cfg):
    part = next(p for p in _question(cfg).parts if p.id == "3.5")
    cases = part.cases(cfg, part_rng(cfg, part))
    expected = [part.expect(c)[0] for c in cases]
    assert None in expected and any(v is not None for v in expected)
    public_none = [c for c, v in zip(cases, expected) if v is None and c.public]
    assert public_none, "a public case shows that None is a legal answer"
    assert {c.calls[0].args.get("overlap", True) for c in cases} == {True, False}


# ---- an axis of one chip costs nothing (docs/spec.md, question 3, as p = 1 in question 2) -----------

@IMPLEMENTATIONS
def test_an_axis_of_one_chip_costs_nothing(impl):
    # Y = 1, summed, on a v5e (C/W = 1.97e14/9e10 = 2,188.9): no TP collective, so the sum is the max,
    # B = X·C/(W·M_X) = 2 · 2,188.9 / 3 = 1,459.26 (the case; charging the TP gather gave 1,527.65)
    b = impl.min_batch_compute_bound(8192, 32768, 2, 1, 1.97e14, 9e10, 3, 1, False)
    assert close(b, Fraction(2 * 197_000_000_000_000, 270_000_000_000))
    # Y = 1 with a tiny F: F·W·M_Y = 24 · 9e10 = 2.16e12 < C, yet there is no TP term to hide:
    # B = 2 · 2,188.9 / 1 = 4,377.8
    b = impl.min_batch_compute_bound(8, 24, 2, 1, 1.97e14, 9e10, 1, 1)
    assert close(b, Fraction(2 * 197_000_000_000_000, 90_000_000_000))
    # X = 1: no FSDP collective; the TP comms hide (53,248 · 1.8e11 >= 4 · 4.6e14): every batch, B = 0
    assert impl.min_batch_compute_bound(D, F, 1, 4, C, W, 1, 1) == 0.0
    assert impl.min_batch_compute_bound(D, F, 1, 4, C, W, 1, 1, False) == 0.0
    # X = 1 and TP comms that never hide (Y = 32: 32 · 4.6e14 > 9.585e15): still no batch
    assert impl.min_batch_compute_bound(D, F, 1, 32, C, W, 1, 1) is None
    assert impl.min_batch_compute_bound(D, F, 1, 32, C, W, 1, 1, False) is None
    # a 1 x 1 mesh: nothing to communicate, every batch
    assert impl.min_batch_compute_bound(D, F, 1, 1, C, W, 1, 1, False) == 0.0


def _cases_35(cfg):
    part = next(p for p in _question(cfg).parts if p.id == "3.5")
    return part, part.cases(cfg, part_rng(cfg, part))


def _chip_axes(c, w, course_device):
    """The torus axes of the chip a case's (C, W) name: a preset's, or the course's; 2 for a made-up chip
    (the smallest torus)."""
    from shardlab.reference.specs import HARDWARE
    for hw in (*HARDWARE.values(), course_device):
        if (hw.flops_per_second, hw.ici_bytes_per_second) == (c, w):
            return hw.torus_axes
    return 2


def test_every_3_5_case_is_a_mesh_its_chip_holds(cfg):
    part, cases = _cases_35(cfg)
    for case in cases:
        a = case.calls[0].args
        assert a["m_x"] + a["m_y"] <= _chip_axes(a["flops_per_second"], a["w_ici"], cfg.comm4d.device), case


def test_the_random_meshes_fit_their_chips():
    import random
    from shardlab.autograder.questions.comm4d import _mesh
    from shardlab.reference.specs import HARDWARE
    rng = random.Random(7)
    drawn = [_mesh(rng) for _ in range(2000)]
    for args, c, w in drawn:
        chip = next(h for h in HARDWARE.values() if (h.flops_per_second, h.ici_bytes_per_second) == (c, w))
        assert args["m_x"] + args["m_y"] <= chip.torus_axes
    # both chips and both kinds of one-chip axis are drawn, and a 3D torus's third axis is used
    assert {c for _, c, _ in drawn} == {4.6e14, 1.97e14}
    assert any(a["x"] == 1 for a, _, _ in drawn) and any(a["y"] == 1 for a, _, _ in drawn)
    assert any(a["m_x"] + a["m_y"] == 3 for a, _, _ in drawn)


def test_a_correct_one_chip_answer_is_never_the_other_convention(cfg):
    """On a mesh with an axis of one chip both conventions give the same batch, so the flipped-convention
    feedback cannot be named there; charging the one-chip collective is named instead."""
    part, cases = _cases_35(cfg)
    one_chip = [c for c in cases if 1 in (c.calls[0].args["x"], c.calls[0].args["y"])]
    assert {c.public for c in one_chip} == {True, False}
    charged = 0
    for case in one_chip:
        names = {m.name for m, _ in alternatives(part, case, part.expect(case))}
        assert "summed where overlapped" not in names
        charged += "one-chip axis charged" in names
    assert charged >= 2


def test_the_handout_states_the_one_chip_rule_and_the_torus(cfg):
    handout = render_markdown(cfg, solutions=False)
    assert "On an axis of **one** chip (X = 1 or Y = 1) there is nothing to move" in handout
    assert "whatever the size of the axis." in handout and "(3 on a TPU v5p)" in handout
