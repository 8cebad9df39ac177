"""The bucket experiment's arithmetic (the timed runs are tests/test_kit_bucket_experiment_command.py)."""
import math

import pytest

from shardlab.autograder.kit.bucket_experiment import (BUCKET_MB, CostModel, fit_overhead_bandwidth, fit_step_costs,
                                               gradient_bytes, quartiles, summarise, swept_range)
import shardlab.reference.buckets as course_model

pytestmark = pytest.mark.pure
S = 128 * (256 * 256 + 256) * 4          # the swept model's gradient bytes


def test_fit_recovers_overhead_and_bandwidth_exactly():
    sizes = [4096, 10**6, 2 * 10**6, 8 * 10**6]
    fit = fit_overhead_bandwidth(sizes, [1e-4 + b / 1e9 for b in sizes])   # o = 100 us, w = 1 GB/s
    assert fit.overhead == pytest.approx(1e-4, rel=1e-9)
    assert fit.bandwidth == pytest.approx(1e9, rel=1e-9)
    assert fit.residual == pytest.approx(0, abs=1e-12)


def test_fit_weighs_relative_error_so_small_sizes_set_the_overhead():
    # o = 1 ms, w = 1 GB/s, but the 64 MB point is 10 % slow. Plain least squares would let that one
    # point (6.7 ms off) drag o far from 1 ms; on relative error the three small points pin o.
    sizes = [4096, 16384, 65536, 64 * 2**20]
    seconds = [1e-3 + b / 1e9 for b in sizes]
    seconds[-1] *= 1.1
    fit = fit_overhead_bandwidth(sizes, seconds)
    assert fit.overhead == pytest.approx(1e-3, rel=0.05)
    assert fit.bandwidth == pytest.approx(1e9 / 1.1, rel=0.02)


def test_step_fit_recovers_constant_overhead_and_bandwidth():
    n_b = [256, 128, 43, 19, 9, 5, 3, 2, 1]
    c, o, w = 0.05, 1e-3, 2e9
    constant, fit = fit_step_costs(n_b, [c + n * o + S / (n * w) for n in n_b], S, course_model.ddp_overhead_seconds)
    assert constant == pytest.approx(c) and fit.overhead == pytest.approx(o) and fit.bandwidth == pytest.approx(w)


def test_step_fit_drops_a_negative_term():
    # overhead falling with n_b everywhere would need a negative per-call cost: the fit keeps c and s/w only
    n_b = [8, 4, 2, 1]
    constant, fit = fit_step_costs(n_b, [0.01 + 0.04 / n - 0.001 * n for n in n_b], S,
                                   course_model.ddp_overhead_seconds)
    assert fit.overhead == 0.0 and math.isfinite(fit.bandwidth)


def test_quartiles_of_an_odd_and_a_single_sample():
    assert quartiles([1.0, 2.0, 3.0, 4.0, 5.0]) == (2.0, 3.0, 4.0)
    assert quartiles([7.0]) == (7.0, 7.0, 7.0)


def test_predicted_sizes_are_clamped_to_the_sweep():
    assert swept_range(lambda: float("inf")) == BUCKET_MB[-1] * 2**20
    assert swept_range(lambda: 0.0) == BUCKET_MB[0] * 2**20
    assert swept_range(lambda: 5 * 2**20) == 5 * 2**20


def test_the_swept_model_has_tens_of_megabytes_of_gradients():
    assert sum(gradient_bytes()) == S == 33_685_504


def test_summary_uses_the_given_cost_model_not_the_course_one():
    """The kit plots the student's own functions: a model that doubles every prediction shows doubled."""
    class Doubled:
        assign_buckets = staticmethod(course_model.assign_buckets)

        @staticmethod
        def ddp_overhead_seconds(s, w, o, n):
            return 2 * course_model.ddp_overhead_seconds(s, w, o, n)

        @staticmethod
        def optimal_bucket_bytes(s, w, o):
            return 2 * course_model.optimal_bucket_bytes(s, w, o)

    fit = fit_overhead_bandwidth([4096, 2**26], [1e-3 + 4096 / 1e9, 1e-3 + 2**26 / 1e9])
    steps = {mb: [0.1 + 0.001 * i + mb / 1000] for i, mb in enumerate([0] + BUCKET_MB)}
    ours = summarise(fit, [[1.0]] * 8, steps, CostModel.of(course_model))
    theirs = summarise(fit, [[1.0]] * 8, steps, CostModel.of(Doubled))
    assert theirs["predicted_best_bytes"] == pytest.approx(2 * ours["predicted_best_bytes"])
    # sqrt(s w o) = sqrt(33,685,504 B x 1e9 B/s x 1e-3 s) = 5,803,921 B
    assert ours["predicted_best_bytes"] == pytest.approx(math.sqrt(S * 1e9 * 1e-3), rel=1e-6)
    assert [r["predicted_seconds"] for r in theirs["rows"]] == pytest.approx(
        [2 * r["predicted_seconds"] for r in ours["rows"]])
