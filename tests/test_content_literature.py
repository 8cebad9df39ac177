"""The content is honest to the literature (issue 33, docs/spec.md): each graded convention
that departs from the literature is named beside it, each premise of a question comes with
its realistic figure in the solutions, the Scaling Book's shortcut is a recognised mistake,
each case label tells the truth, and no feedback calls the graded rule PyTorch's.
Numbers derived here by hand."""
import ast
import math
import re

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.core.parts import Call, Case, alternatives
from shardlab.autograder.engine.plan import find_part, part_cases
from shardlab.autograder.publish.render import render_markdown
from shardlab.autograder.questions import all_parts
from shardlab.reference import comm4d, fsdp, pipeline
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure


@pytest.fixture(scope="module")
def documents():
    cfg = load_config()
    return {"handout": render_markdown(cfg, False), "solutions": render_markdown(cfg, True)}


# ---- conventions named beside the literature's -------------------------------------------

NAMED = {
    # Megatron-LM's "bubble time fraction" is the course's bubble ratio
    "bubble time fraction": ("handout", "solutions"),
    "Megatron-LM": ("handout", "solutions"),
    # the all-gather model leaves out the standard factor; the solutions give it
    "the literature's: the standard costs of an all-gather": ("handout",),
    "(p−1)/p · m/β (recursive doubling)": ("solutions",),
    # the DDP overhead model's assumptions, stated as such
    "the calls run one after another": ("handout",),
    "the all-reduce calls are serialised": ("solutions",),
    # PyTorch DDP's own bucketing
    "caps its first bucket at 1 MiB": ("handout", "solutions"),
    "closes a bucket once it *reaches* the cap": ("handout",),
    # the Scaling Book's two editions, where 3.5 states its convention
    "Editions of the TPU Scaling Book differ here": ("handout", "solutions"),
    # autocast's weight casts, a term of their own
    "Autocast's weight casts, a term of their own": ("handout", "solutions"),
    # the inter-node premise, and NCCL's rings beside it
    "**across nodes, a flat ring over per-device NICs**": ("handout", "solutions"),
    "*The inter-node network as NCCL uses it.*": ("solutions",),
    # both editions of the Scaling Book, named as editions
    "the Feb-2025 edition sums the FSDP and TP comms, the later edition": ("handout", "solutions"),
    "*The Scaling Book's shortcut, in both editions.*": ("solutions",),
}


@pytest.mark.parametrize("text", NAMED)
def test_each_convention_is_named_where_it_is_taught(documents, text):
    for doc in NAMED[text]:
        assert text in documents[doc], f"{text!r} missing from the {doc}"


def test_the_handout_no_longer_calls_the_casts_transient_nor_credits_the_lecture(documents):
    handout = documents["handout"]
    assert "made on the fly" not in handout
    assert "as the lecture's example does" not in handout
    assert "because this problem says so" in handout


def test_sequence_parallelism_in_the_3d_rubric_with_what_it_buys(documents):
    solutions = documents["solutions"]
    rubric = solutions[solutions.index("**Rubric"):solutions.index("## Question 4")]
    assert "Sequence parallelism" in rubric
    assert "What it buys is activation memory" in rubric and "does not buy is a smaller batch" in rubric
    assert "Sequence parallelism" not in documents["handout"]


# ---- realism notes: in the solutions with their numbers, never in the handout ----------------

REALISM = {
    # memory: 2·(P − D·F) = 437,952,446,464; 0.81 GB of headroom at N = 61; N = 67 with three unit buffers
    "437.95 GB": "the autocast weight casts of XXL",
    "0.81 GB (808,858,867 bytes)": "the headroom at the graded FSDP degree",
    "**N = 67**": "the FSDP degree counting the gathered, prefetched and gradient buffers",
    # pipeline: 16·219,848,638,464/6 = 586,263,035,904; with 71,873,593,344 of activations, 8.2 H100s -> 9
    "586.26 GB (586,263,035,904 bytes)": "one stage's training state",
    "**9 × H100**": "the H100s one stage needs",
    # comm4d: (4.6e14/1.8e11)^2 / (2·1·53,248) = 6,530,864.2 / 106,496 = 61.33 tokens per chip
    "61.3 tokens per chip": "the Scaling Book's takeaway",
    # fsdp: 5e-6·3 + 7/8·1,744,830,464/4.5e11 = 1.5e-5 + 3.3927e-3 = 3.408 ms
    "**3.408 ms**": "the standard all-gather within a node",
    # memory: Korthikanti et al. per layer, s = 4096, h = 16384, a = 16384/128 = 128, b = 1:
    # 34·4096·16384 = 2,281,701,376; 5·128·4096² = 10,737,418,240; sum 13,019,119,616; x 126 layers
    "1,640.41 GB (1,640,409,071,616 bytes)": "a full transformer layer's activations",
    # without the scores: 126 · 2,281,701,376 = 287,494,373,376
    "287.49 GB (287,494,373,376 bytes)": "a transformer layer's activations without the attention scores",
    # 1 (b) read with 4096 global tokens: see test_hand_grading_notes_of_1b_by_hand
    "**N = 38**": "the FSDP degree with the tokens read as the global batch",
    # fsdp across 8 nodes of 8 H100s at the node's egress, 8 · 5e10 = 4e11 bytes/s:
    # 2e-5 · log2(64) + 1,744,830,464 / 4e11 = 1.2e-4 + 4.36208e-3 = 4.482 ms (< the 7.226 ms forward)
    "**4.482 ms: hidden behind the forward**": "the inter-node all-gather on rail-aligned rings",
    # 9.89e14/2 · (1.2e-4/872,415,232 + 2/4e11) = 4.945e14 · 5.13755e-12 = 2,540.5
    "**2,541 tokens per device**": "the tokens that hide it on rail-aligned rings",
    # comm4d, the Feb-2025 edition: 4 · 61.325 = 245.3 tokens per chip
    "245.3 tokens per chip": "the Feb-2025 edition's takeaway",
}


@pytest.mark.parametrize("number", REALISM)
def test_each_realism_note_is_in_the_solutions_only(documents, number):
    assert number in documents["solutions"], REALISM[number]
    assert number.strip("*") not in documents["handout"], REALISM[number]


def test_realism_numbers_by_hand(cfg):
    assert pipeline.worked(cfg)["note_stage_state"].value == 16 * 219_848_638_464 // 6 == 586_263_035_904
    assert pipeline.worked(cfg)["note_stage_devices"].value == math.ceil((586_263_035_904 + 71_873_593_344) / 80e9) == 9
    assert comm4d.scaling_book_takeaway_per_chip(53248, 4.6e14, 1.8e11, 2, 1) == pytest.approx(61.327, rel=1e-4)
    assert fsdp.standard_allgather_seconds(2 * 872_415_232, 8, 5e-6, 4.5e11) == pytest.approx(3.4077e-3, rel=1e-4)
    assert fsdp.standard_allgather_seconds(1000, 1, 5e-6, 4.5e11) == 0.0      # the factor alone gives 0 at p = 1


def test_transformer_layer_and_global_batch_notes_by_hand(cfg):
    from shardlab.reference import memory
    assert memory.transformer_layer_activation_bytes(4096, 1, 16384, 128) == 13_019_119_616
    w = memory.worked(cfg)
    assert w["note_transformer_activations"].value == 126 * 13_019_119_616 == 1_640_409_071_616
    assert w["note_transformer_activations_no_scores"].value == 126 * 2_281_701_376
    # 71,873,593,344 / 1,640,409,071,616 = 4.38 %; / 287,494,373,376 = 25.0 %
    assert "4.4 %" in w["note_transformer_activations"].shown
    assert "25.0 %" in w["note_transformer_activations_no_scores"].shown


def test_hand_grading_notes_of_1b_by_hand(cfg, documents):
    """S = 16 · 219,848,638,464 = 3,517,578,215,424, A = 71,873,593,344, capacity 95e9. The tokens
    read as the global batch: per device S/N + A/(2N²) + A/(2N). N = 37: S/37 = 95,069,681,498 > 95e9
    already. N = 38: 92,567,847,774 + 24,886,286 + 945,705,175 = 93,538,439,235 < 95e9. So 38,
    against the course's 61."""
    from shardlab.reference import memory
    assert memory.min_fsdp_degree_global_batch(3_517_578_215_424, 71_873_593_344, 95e9) == 38
    assert memory.worked(cfg)["note_n_fsdp_global_batch"].value == 38
    notes = documents["solutions"][documents["solutions"].index("*Hand-grading notes for (b).*"):]
    assert "**N = 61" in notes[:notes.index("## Question 2")] and "**N = 38**" in notes


def test_the_inter_node_answers_that_flip_by_hand(cfg, documents):
    """Flat ring: 1.2e-4 + 1,744,830,464/5e10 = 35.017 ms >= the 7.226 ms forward (2 · 4096 · 872,415,232
    / 9.89e14): communication-bound; 2·4096/9.89e14 = 8.28e-12 < 2/5e10 = 4e-11, so the device count is 1.
    At the node's egress: 4.482 ms, hidden; 8.28e-12 > 2/4e11 = 5e-12, so a limit, 2^((3.283e-12 ·
    872,415,232)/2e-5) = 2^143.2."""
    assert fsdp.node_egress_beta(5e10, 8) == 4e11
    w = fsdp.worked(cfg)
    assert w["note_rail_pmax"].value == pytest.approx(2 ** ((2 * 4096 / 9.89e14 - 2 / 4e11) * 872_415_232 / 2e-5),
                                                     rel=1e-9)
    assert 2 ** 143 < w["note_rail_pmax"].value < 2 ** 144 and w["pmax_inter"].value == 1.0
    flips = documents["solutions"][documents["solutions"].index("Answers that flip under this model"):]
    assert flips.startswith("Answers that flip under this model: the verdict across nodes at 4,096 tokens per "
                            "device, from communication-bound to hidden; the device count before communication "
                            "binds, from no device count hides it (1) to a limit; the tokens needed to hide it "
                            "fall from 19,848 to 2,541")
    assert "rail-aligned" not in documents["handout"] and "400 GB/s" not in documents["handout"]


# ---- the Scaling Book's shortcut on 3.5 ----------------------------------------------------

def _named_on_3_5(args):
    part = find_part("3.5")
    case = Case((Call("comm4d", "min_batch_compute_bound", args),), True, "")
    return part, case, {m.name: v[0] for m, v in alternatives(part, case, part.expect(case))}


def test_the_optimal_x_shortcut_is_named_on_3_5():
    """D = 4096, F = 16384, X = 8, Y = 2, C = 1.97e14, W = 9e10 (a v5e: M_X = M_Y = 1), overlapped:
    B = X·C/(W·M_X) = 8·1.97e14/9e10 = 17,511.1 tokens. α = C/W = 2,188.9, α² = 4,791,111.1.
    The later edition: α²/(M_X·M_Y·F) = 4,791,111.1/16,384 = 292.43 per chip, times N = 16: 4,678.9.
    The Feb-2025 edition: 4α²/(M_X·M_Y·F), 4x that: 18,715.8. The applied chapter: 2α²/F, 2x: 9,357.9."""
    args = dict(d_model=4096, d_ff=16384, x=8, y=2, flops_per_second=1.97e14, w_ici=9e10, m_x=1, m_y=1)
    part, case, named = _named_on_3_5(args)
    assert part.expect(case)[0] == pytest.approx(17_511.11, rel=1e-5)
    assert named["Scaling Book shortcut"] == pytest.approx(4_678.94, rel=1e-5)
    assert named["Scaling Book shortcut, Feb-2025 edition"] == pytest.approx(18_715.76, rel=1e-5)
    assert named["Scaling Book shortcut, applied chapter"] == pytest.approx(9_357.88, rel=1e-5)
    message = next(m.message for m in part.misconceptions if m.name == "Scaling Book shortcut")
    assert "X = X_opt" in message and "Scaling Book" in message


def test_both_editions_are_named_as_editions_never_as_mistakes():
    messages = {m.name: m.message for m in find_part("3.5").misconceptions if m.name.startswith("Scaling Book")}
    later = messages["Scaling Book shortcut"]
    assert "later edition" in later and "α²/(M_X·M_Y·F)" in later
    feb = messages["Scaling Book shortcut, Feb-2025 edition"]
    assert "Feb-2025 edition" in feb and "4α²/(M_X·M_Y·F)" in feb and "sums the FSDP and TP comms" in feb
    applied = messages["Scaling Book shortcut, applied chapter"]
    assert "2·2550²/F = 453" in applied and "applied-training chapter" in applied
    for text in messages.values():
        assert not re.search(r"misconception|mistake|wrong|error", text, re.I), text
        assert "X = X_opt" in text


def test_the_applied_chapters_number_by_hand():
    """LLaMA-3 70B (F = 28,672) on a v5p as the book has it (C = 4.59e14, W = 1.8e11, α = 2,550):
    2·2550²/28,672 = 13,005,000/28,672 = 453.6 tokens per chip, the Feb-2025 criterion at M_X·M_Y = 2
    (so on such a mesh the two give one value, and the grader names neither: `parts.alternatives`)."""
    args = dict(d_model=8192, d_ff=28672, x=16, y=8, flops_per_second=4.59e14, w_ici=1.8e11, m_x=2, m_y=1)
    part = find_part("3.5")
    case = Case((Call("comm4d", "min_batch_compute_bound", args),), True, "")
    alt = {m.name: m.alt(case)[0] for m in part.misconceptions}
    assert alt["Scaling Book shortcut, applied chapter"] / 128 == pytest.approx(453.58, rel=1e-4)
    feb, applied = alt["Scaling Book shortcut, Feb-2025 edition"], alt["Scaling Book shortcut, applied chapter"]
    assert feb == pytest.approx(applied)


# ---- labels tell the truth -----------------------------------------------------------------

# a course with question 2 unlike the shipped one (the second course, a100.toml, does not set it)
SMALL_FSDP_COURSE = ('[course]\nname = "Small"\nquestions = ["fsdp"]\n'
                     '[model]\nname = "S8"\nd_model = 1024\nd_ff = 4096\nnum_blocks = 8\n')


@pytest.mark.parametrize("own", [False, True], ids=["shipped", "small"])
def test_a_past_float_range_label_is_only_on_an_infinite_answer(own, tmp_path):
    """The shipped course's intra-node count is 2^669.8 = 4.2e201, a float: not past float range."""
    course = None
    if own:
        course = tmp_path / "small.toml"
        course.write_text(SMALL_FSDP_COURSE)
    cfg = load_config(course)
    assert "2.4" in {p.id for p in all_parts(cfg)}
    part = find_part("2.4")
    groups = {case.group for case in part_cases(cfg, "2.4")}
    assert course is not None or "edge case: astronomically many devices, within float range" in groups
    for case in part_cases(cfg, "2.4"):
        [value] = part.expect(case)
        if "past float range" in case.group:
            assert math.isinf(value), (case.group, value)
        if "astronomically" in case.group:
            assert 1e12 < value < math.inf


# ---- feedback never calls the graded rule PyTorch's ----------------------------------------

CLAIM = re.compile(r"\b(PyTorch|DDP|torch)\b[^.;:]*\b(does|fills|assigns|closes|orders|buckets)\b", re.I)


def _kit_check_texts() -> list[str]:
    texts = []
    for path in sorted((content.folder("autograder") / "kit" / "checks").glob("*.py")):
        tree = ast.parse(path.read_text())
        texts += [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
                  and isinstance(node.value, str) and len(node.value) > 20]
    return texts


def test_no_feedback_says_the_graded_rule_is_pytorchs():
    messages = [m.message for p in all_parts() for m in p.misconceptions] + _kit_check_texts()
    assert messages
    claims = [m for m in messages if CLAIM.search(m)]
    assert claims == []
    # the wording this replaced would be caught
    assert CLAIM.search("matches filling buckets in forward order: DDP fills them from the last parameter")
