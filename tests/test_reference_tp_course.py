"""The example course's question 6 (examples/tp-course/, spec in its README): the
reference by hand, the solution against the reference on random inputs, and the
comparator of 6.5 naming each mistake's cause. The files are read as plain
modules (not as the course folder the engine loads), so this process's registry
stays the package's."""
from __future__ import annotations

import importlib.util
import random

import pytest

from shardlab.autograder.core import content

pytestmark = pytest.mark.pure

FOLDER = content.ROOT / "examples" / "tp-course" / "questions" / "tp"


def _module(file: str):
    spec = importlib.util.spec_from_file_location(f"tp_course_{file[:-3]}", FOLDER / file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ref, solution, checks = _module("reference.py"), _module("solution.py"), _module("checks.py")


def test_collective_bytes_by_hand():
    # 1,000 bytes over 4 devices: 3/4 of it for a gather or a scatter, twice that for an all-reduce
    assert ref.collective_bytes("all_gather", 1000, 4) == 750
    assert ref.collective_bytes("reduce_scatter", 1000, 4) == 750
    assert ref.collective_bytes("all_reduce", 1000, 4) == 1500
    assert ref.collective_bytes("all_reduce", 1000, 1) == 0


def test_collective_seconds_by_hand():
    # a reduce-scatter of 1,000 bytes over 4: 3 steps of 1 us plus 750 bytes at 1e9 B/s = 3.75 us
    assert ref.collective_seconds("reduce_scatter", 1000, 4, 1e-6, 1e9) == pytest.approx(3.75e-6)
    # an all-reduce: 6 steps plus 1,500 bytes = 7.5 us
    assert ref.collective_seconds("all_reduce", 1000, 4, 1e-6, 1e9) == pytest.approx(7.5e-6)
    assert ref.collective_seconds("all_gather", 1000, 1, 1e-6, 1e9) == 0


def test_layer_collectives_by_hand():
    # column-parallel W_in (8 -> 16): dX of 4 x 8 BF16 values all-reduced in backward; row-parallel
    # W_out (16 -> 8): Y of 4 x 8 values all-reduced in forward
    assert ref.layer_collectives("column", 4, 8, 16, 2) == {"forward": None, "backward": ["all_reduce", 64]}
    assert ref.layer_collectives("row", 4, 16, 8, 2) == {"forward": ["all_reduce", 64], "backward": None}


def test_compute_bound_tokens_by_hand():
    # d_in 4096, d_out 1024, t 4, C 1e12, alpha 1 us, beta 1e10, BF16: per token the matmul takes
    # 2 · 4096 · 1024 / 4e12 = 2.097152 us and the all-reduce's bytes 2 · 3 · 1024 · 2 / 4e10 = 0.3072 us;
    # the latency 2 · 3 · 1 us = 6 us is hidden from ceil(6 / 1.789952) = ceil(3.352) = 4 tokens
    assert ref.compute_bound_tokens(4096, 1024, 4, 1e12, 1e-6, 1e10, 2) == 4
    # with beta 1e9 the bytes alone (3.072 us per token) outgrow the matmul: never
    assert ref.compute_bound_tokens(4096, 1024, 4, 1e12, 1e-6, 1e9, 2) is None
    assert ref.compute_bound_tokens(4096, 1024, 1, 1e12, 1e-6, 1e9, 2) == 1


def test_forward_2d_collectives_by_hand():
    # tokens 4, D 8, F 16 on 2 x 2: In and Out 4/2 · 8 · 2 = 32 bytes, W_in and W_out 8 · 16/2 · 2 = 128
    assert ref.forward_2d_collectives(4, 8, 16, 2, 2) == [
        ["In", "all_gather", "y", 32], ["W_in", "all_gather", "x", 128], ["W_out", "all_gather", "x", 128],
        ["Out", "reduce_scatter", "y", 32]]


def test_the_solution_agrees_with_the_reference_on_random_inputs():
    rng = random.Random(6)
    for _ in range(200):
        op, payload, p = rng.choice(ref.OPS), rng.randint(1, 10**10), rng.randint(1, 64)
        alpha, beta = rng.choice([1e-6, 5e-6]), rng.choice([1e10, 4.5e11])
        assert solution.collective_bytes(op, payload, p) == pytest.approx(ref.collective_bytes(op, payload, p))
        assert solution.collective_seconds(op, payload, p, alpha, beta) == pytest.approx(
            ref.collective_seconds(op, payload, p, alpha, beta))
        layer, dims = rng.choice(["column", "row"]), [rng.randint(1, 8192) for _ in range(3)]
        assert solution.layer_collectives(layer, *dims, 2) == ref.layer_collectives(layer, *dims, 2)
        d_in, d_out, t = 128 * rng.randint(1, 512), 128 * rng.randint(1, 512), rng.choice([1, 2, 4, 8])
        assert solution.compute_bound_tokens(d_in, d_out, t, 9.89e14, alpha, beta, 2) == \
            ref.compute_bound_tokens(d_in, d_out, t, 9.89e14, alpha, beta, 2)


EXPECTED = [["In", "all_gather", "y", 32], ["W_in", "all_gather", "x", 128], ["W_out", "all_gather", "x", 128],
            ["Out", "reduce_scatter", "y", 32]]
RIGHT = [["all_gather", "y", 32], ["all_gather", "x", 128], ["all_gather", "x", 128], ["reduce_scatter", "y", 32]]


def _ranks(collectives, output_ok=True):
    return [{"collectives": collectives, "output_ok": output_ok} for _ in range(4)]


def test_the_comparator_passes_the_four_collectives_in_any_order():
    assert checks.FORWARD_2D(EXPECTED, _ranks(RIGHT))
    assert checks.FORWARD_2D(EXPECTED, _ranks([RIGHT[1], RIGHT[0], RIGHT[2], RIGHT[3]]))


def test_the_comparator_names_each_mistake():
    wrong_axis = [["all_gather", "x", 32], *RIGHT[1:]]
    assert checks.FORWARD_2D.problem(EXPECTED, _ranks(wrong_axis, False)) == (
        "rank 0: an all-gather ran along x where In's runs along y: In is sharded along y, so gathering along x "
        "is gathering along the wrong mesh axis")
    all_reduce = [*RIGHT[:3], ["all_reduce", "y", 32]]
    said = checks.FORWARD_2D.problem(EXPECTED, _ranks(all_reduce))
    assert said.startswith("rank 0: Out is all-reduced along y where the forward reduce-scatters it")
    assert "an all-reduce moves twice the bytes" in said
    assert checks.FORWARD_2D.problem(EXPECTED, _ranks(RIGHT, False)) == (
        "rank 0: the collectives are right, but the Out block differs from the single-process forward")
    assert "missing reduce-scatter along y" in checks.FORWARD_2D.problem(EXPECTED, _ranks(RIGHT[:3]))
    assert checks.FORWARD_2D.problem(EXPECTED, []) == "returned no per-rank results"
    assert checks.FORWARD_2D.problem(EXPECTED, [{"bad": 1}]) == "rank 0: returned no trace"
