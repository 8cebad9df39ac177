"""A course whose own numbers make a sub-question degenerate (no FSDP degree fits, no batch is
compute bound, fewer than one bucket, a one-stage pipeline, ...): `questions.degeneracies`
names it, the handout asks why instead of asking for a number, the solutions say what happens
instead of printing a nonsense number, and `shardlab build` warns and still builds.

Each case's degeneracy is derived by hand below from the formulas of docs/spec.md, not by
calling the reference. Each case's course sets only the question concerned (`[course]
questions`), so that only its figures are drawn. `shardlab build`'s warning is checked in
test_publish_degenerate_build.py (a subprocess: the platform tier)."""
import dataclasses
import re

import pytest

from shardlab.autograder.publish.render import render_markdown
from shardlab.autograder.questions import answer_key, degeneracies
from shardlab.reference.config import load_config, replaced
from shardlab.reference.specs import Hardware, ModelConfig

pytestmark = pytest.mark.pure

BANNER = "Degenerate on this course."


@dataclasses.dataclass(frozen=True)
class Case:
    toml: str                       # the course's sections besides [course] questions
    module: str                     # the question it makes degenerate
    sentence: tuple[str, ...]       # what degeneracies(cfg)[module] must say
    handout: tuple[str, ...]        # what the handout must say instead of asking for a number
    solutions: tuple[str, ...]      # what the solutions must say
    nonsense: tuple[str, ...]       # what neither may print (the number the degenerate case would give)


CASES = {
    # Q1 (b) on a TPU v5e (16 GB): act = L·T·(D + F)·2 = 126 · 4096 · (16384 + 53248) · 2
    # = 71,873,593,344 bytes; per device (16P + act/2)/N + act/2 > act/2 = 35,936,796,672 bytes
    # >= 16e9 at every N, so no N fits (min_fsdp_degree is None).
    "memory: no FSDP degree fits": Case(
        '[memory]\nfsdp_device = "TPU v5e"\n', "memory",
        ("1 (b): no FSDP degree fits one TPU v5e (16 GB)", "35.94 GB"),
        ("With these numbers no N fits: explain why.",),
        ("no FSDP degree fits", "35,936,796,672 >= 16,000,000,000"),
        ("N = 1 ", "*Answer:* N =", "smallest N with memory < TPU v5e (16 GB)**: derive it")),
    # Q2 (a) with p = 1 within a node: an all-gather over one device takes no time at all
    # (spec: "the whole time is 0 for p = 1"), so no token count hides it; the formula of Task 2.5
    # (for p >= 2) would give C/2 · b/β = 9.89e14/2 · 2/4.5e11 = 2,197.8 tokens, which is nonsense.
    "fsdp: one device within a node": Case(
        "[fsdp]\nintra_devices = 1\n", "fsdp",
        ("2 (a): with p = 1 device within a node there is nothing to all-gather",),
        ("With p = 1 device within a node there is nothing to all-gather",),
        ("none: with nothing to gather, any number of tokens hides it", "0 ms: one device holds the whole unit"),
        ("2,198 tokens", "a node holds only 1 devices")),
    # Q3 (b) on x = 2, y = 32: the TP comms hide only if F·W_ici·M_Y >= Y·C (overlapped), and
    # 53,248 · 1.8e11 · 1 = 9.585e15 < 32 · 4.6e14 = 1.472e16: no batch is compute bound, and
    # (c) and (d), which start from that batch, have none either.
    "comm4d: no batch is compute bound": Case(
        "[comm4d]\nx = 2\ny = 32\n", "comm4d",
        ("3 (b)-(d): no batch makes this mesh compute bound", "9.585e+15 < Y·C = 1.472e+16"),
        ("With these numbers no batch makes this mesh compute bound: explain why.",
         "With these numbers (b) has no batch: give each volume as a function of the global batch B instead.",
         "so that some batch does?"),
        ("no batch is large enough", "there is no batch to count the collectives at",
         "Rubric (this course has no compute-bound batch)"),
        ("tokens per chip, a global batch", "B = no batch", "a smaller global batch than in (b)", "X_opt ≈")),
    # Q3 (c) on y = 3: F/Y = 53,248/3 = 17,749.33 (its digits sum to 22, not a multiple of 3), so
    # W_in[D_X, F_Y] has no whole shards and the collectives no volume per chip; (b) still has a
    # batch, since 53,248 · 1.8e11 · 1 = 9.585e15 >= 3 · 4.6e14 = 1.38e15.
    "comm4d: F does not split over Y": Case(
        "[comm4d]\ny = 3\n", "comm4d",
        ("3 (c): F = 53,248 does not split evenly over Y = 3",),
        ("With these numbers F = 53,248 does not split evenly over Y = 3",),
        ("F must be padded to a multiple of Y", "tokens per chip"),
        ("allgather_in", "collective volumes per chip")),
    # Q3 with X = 1: an FSDP axis of one chip moves nothing and costs nothing (docs/spec.md, question 3, as
    # p = 1 in question 2); the TP comms hide (F·W·M_Y = 53,248 · 1.8e11 = 9.585e15 >= Y·C = 4 · 4.6e14
    # = 1.84e15), so every batch is compute bound. Charging the gather anyway would give
    # B = X·C/(W·M_X) = 4.6e14/(1.8e11 · 2) = 1,277.8 tokens, which is nonsense.
    "comm4d: an FSDP axis of one chip": Case(
        "[comm4d]\nx = 1\n", "comm4d",
        ("3: an axis of one chip, X = 1 (no FSDP)", "every batch is compute bound"),
        ("With these numbers every batch makes this mesh compute bound: explain why.",
         "On an axis of **one** chip (X = 1 or Y = 1) there is nothing to move"),
        ("*Answer:* every batch.", "0 s: X = 1 moves nothing", "every batch is compute bound on this course"),
        ("1,277.8 tokens", "a smaller global batch than in (b)", "X_opt ≈")),
    # Q3 with Y = 1: no TP collective, T_TP = 0, so the sum equals the max and both conventions give
    # B = X·C/(W·M_X) = 16 · 4.6e14/(1.8e11 · 2) = 20,444.4 tokens. Charging the TP comms when summed
    # would give X·C·F·M_Y/(M_X·(F·W·M_Y − Y·C)) = 3.919e20/(2 · (9.585e15 − 4.6e14)) = 21,475.1 tokens.
    "comm4d: a TP axis of one chip": Case(
        "[comm4d]\ny = 1\n", "comm4d",
        ("3: an axis of one chip, Y = 1 (no tensor parallelism)", "both conventions give the same batch"),
        ("On an axis of **one** chip (X = 1 or Y = 1) there is nothing to move",),
        ("20,444.4 tokens", "both conventions give this batch", "0 s at every B: Y = 1 moves nothing"),
        ("21,475.1", "X_opt ≈")),
    # Q4 (b) with s = 100,000 bytes, w = 1e10 bytes/s, o = 50 µs: sqrt(s/(w·o)) = sqrt(1e5/5e5)
    # = sqrt(0.2) = 0.447 < 1 bucket. The overhead n·o + s/(n·w) is 5e-5 + 1e-5 = 6e-5 s at n = 1,
    # 1e-4 + 5e-6 = 1.05e-4 s at n = 2: it only grows, so one bucket of the whole model is best.
    "buckets: fewer than one bucket": Case(
        "[buckets]\nmodel_bytes = 100_000\n", "buckets",
        ("4 (b): sqrt(s / (w·o)) ≈ 0.45 is below one bucket", "6.000e-05 s"),
        ("With these numbers the derivative vanishes below one bucket: say which number of buckets is best",),
        ("**1 bucket**", "one bucket holding the whole model, 100,000 bytes", "the overhead stays 6.000e-05 s"),
        ("0.45 buckets", "≈ 0.4 buckets", "≈ 0.5 buckets", "where the calls' overhead and the exposed transfer are "
         "equal", "where the calls' overhead equals the exposed transfer")),
    # Q5 on one stage: bubble fraction (p − 1)/(m + p − 1) = 0/24 = 0 and ratio (p − 1)/m = 0, so
    # they do not differ; there is no stage boundary, so nothing crosses one (the formula
    # 2·m·T_mb·D·2 = 2 · 24 · 4096 · 16384 · 2 = 6,442,450,944 bytes would be nonsense); and
    # ceil((p − 1)(1 − t)/t) = 0 < 1, so the fewest micro-batches is 1.
    "pipeline: a single stage": Case(
        "[pipeline]\nstages = 1\n", "pipeline",
        ("5: the pipeline has a single stage (p = 1)", "no stage boundary"),
        ("This course's pipeline has a single stage (p = 1).",),
        ("there is no bubble", "a single stage has no boundary", "max(1, ceil((1 − 1)"),
        ("6.44 GB", "6,442,450,944", "so it is always the larger", "instead of 0.0000")),
    # Q5 (b) with v = 1: (p − 1)/(v·m + p − 1) = 5/29 = 0.1724, the same as the plain fraction
    # 5/(24 + 5): one chunk per stage is no interleaving.
    "pipeline: one chunk per stage": Case(
        "[pipeline]\nchunks = 1\n", "pipeline",
        ("5 (b): v = 1 chunk per stage is no interleaving", "0.1724"),
        ("This course sets v = 1 model chunk per stage, which is no interleaving",),
        ("v = 1 is no interleaving: 0.1724, the same as (a)'s 0.1724",),
        ("0.1724 instead of 0.1724", "Each stage now holds v = 1 model chunks instead of one")),
    # Q5 (e) with a 100 % target: t = 1, and the fraction 5/(m + 5) < 1 for every m >= 1, so one
    # micro-batch meets it; the bound ceil((p − 1)(1 − t)/t) = ceil(0) = 0 would be nonsense.
    "pipeline: a target every m meets": Case(
        "[pipeline]\ntarget_bubble_percent = 100\n", "pipeline",
        ("5 (e): the bubble fraction is below 100 % for every m", "the fewest is 1"),
        ("With these numbers any number of micro-batches reaches it: explain why.",),
        ("max(1, ceil((6 − 1) · (1 − 1) / 1)) = **m = 1**", "is met by any number of micro-batches"),
        ("$m = \\left\\lceil", "= **m = 0**")),
}


def _course(tmp_path, case: Case):
    path = tmp_path / "course.toml"
    path.write_text(f'[course]\nquestions = ["{case.module}"]\n' + case.toml)
    return load_config(path)


def _no_derived_number(handout: str, cfg) -> list[str]:
    """The results the solutions print that the handout prints too (a non-degenerate answer given
    away): every Worked result with a digit, as the reference formats it."""
    shown = {w.shown for items in answer_key(cfg).values() for w in items.values()
             if w.value is not None and re.search(r"\d", w.shown) and len(w.shown) >= 6}
    return sorted(s for s in shown if s in handout)


@pytest.mark.parametrize("name", CASES)
def test_a_degenerate_course_says_what_happens_instead(tmp_path, name):
    case = CASES[name]
    cfg = _course(tmp_path, case)
    found = degeneracies(cfg)
    assert list(found) == [case.module]
    sentence = found[case.module]
    assert all(s in sentence for s in case.sentence), sentence
    handout, solutions = render_markdown(cfg, solutions=False), render_markdown(cfg, solutions=True)
    for phrase in case.handout:
        assert phrase in handout and phrase in solutions, phrase
    for phrase in case.solutions:
        assert phrase in solutions, phrase
    for phrase in case.nonsense:
        assert phrase not in handout and phrase not in solutions, phrase
    # the solutions carry the sentence under the question's title; the handout never does, nor
    # anything else the solutions derive
    assert f"> **{BANNER}** {sentence}." in solutions
    assert BANNER not in handout and sentence not in handout
    assert _no_derived_number(handout, cfg) == []


def test_the_shipped_course_is_not_degenerate(cfg):
    assert degeneracies(cfg) == {}
    assert BANNER not in render_markdown(cfg, solutions=True)


def test_only_the_questions_a_course_sets_count(tmp_path):
    # the memory case's numbers (a TPU v5e, see above) on a course that sets only buckets
    path = tmp_path / "course.toml"
    path.write_text('[course]\nquestions = ["buckets"]\n[memory]\nfsdp_device = "TPU v5e"\n')
    assert degeneracies(load_config(path)) == {}


def test_a_target_no_number_of_microbatches_meets(cfg):
    # not a course a TOML can set ([pipeline].target_bubble_percent must be positive), but a config
    # made in code can: for p > 1 the fraction (p − 1)/(m + p − 1) is positive at every m, so a
    # target of 0 % is met by none (min_microbatches is None)
    course = replaced(cfg, {"course.questions": ("pipeline",), "pipeline.target_bubble_percent": 0})
    assert degeneracies(course) == {"pipeline": "5 (e): no number of micro-batches brings the bubble "
                                                "fraction to at most 0 %"}
    handout, solutions = render_markdown(course, solutions=False), render_markdown(course, solutions=True)
    assert "With these numbers no number of micro-batches reaches it: explain why." in handout
    assert "*Answer:* impossible: with p = 6 stages the bubble fraction is positive for every m" in solutions


def test_the_other_overlap_convention_without_a_batch_is_said_in_words(cfg):
    # Not degenerate: the course's convention (overlapped) has a batch, but the summed one has none.
    # A chip with C = 4e14 FLOP/s and W_ici = 1e11 bytes/s, F = 16,000, Y = 4, M_Y = 1:
    # F·W_ici·M_Y = 1.6e15 = Y·C exactly, so the TP comms hide when overlapped (>=) and never when
    # summed (F·W_ici·M_Y − Y·C = 0 leaves no batch).
    chip = Hardware("tie chip", capacity_bytes=16 * 10**9, flops_per_second=4e14, ici_bytes_per_second=1e11)
    course = replaced(dataclasses.replace(cfg, model=ModelConfig("tie", 4096, 16_000, 126)),
                      {"course.questions": ("comm4d",), "comm4d.device": chip, "comm4d.x": 16, "comm4d.y": 4,
                       "comm4d.m_x": 2, "comm4d.m_y": 1})
    assert degeneracies(course) == {}
    solutions = render_markdown(course, solutions=True)
    assert "In the other convention (comms summed): no batch is large enough" in solutions
    assert "B = no batch" not in solutions
