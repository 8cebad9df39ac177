"""The bucket experiment's arithmetic (the timed run itself is `shardlab bench buckets`)."""
import pytest

from shardlab.autograder.bench.buckets import gradient_bytes, fit_overhead_bandwidth

pytestmark = pytest.mark.pure


def test_fit_recovers_overhead_and_bandwidth_exactly():
    sizes = [0, 10**6, 2 * 10**6, 8 * 10**6]
    fit = fit_overhead_bandwidth(sizes, [1e-4 + b / 1e9 for b in sizes])   # o = 100 us, w = 1 GB/s
    assert fit.overhead == pytest.approx(1e-4, rel=1e-9)
    assert fit.bandwidth == pytest.approx(1e9, rel=1e-9)
    assert fit.residual == pytest.approx(0, abs=1e-15)


def test_fit_residual_is_the_rms_error():
    fit = fit_overhead_bandwidth([0, 1, 2, 3], [1.5, 1.5, 3.5, 3.5])
    # least squares through (0,1.5),(1,1.5),(2,3.5),(3,3.5): slope 0.8, intercept 1.3
    assert fit.overhead == pytest.approx(1.3) and fit.bandwidth == pytest.approx(1 / 0.8)
    # residuals 0.2, -0.6, 0.6, -0.2: RMS sqrt((0.04 + 0.36 + 0.36 + 0.04) / 4) = sqrt(0.2)
    assert fit.residual == pytest.approx(0.2 ** 0.5)


def test_the_swept_model_has_tens_of_megabytes_of_gradients():
    grads = gradient_bytes()
    assert sum(grads) == 32 * (512 * 512 + 512) * 4 == 33_619_968
