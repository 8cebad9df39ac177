"""solutions/ is a second, independent implementation: it must agree with the
reference on many random inputs."""
import pytest
from hypothesis import given, settings, strategies as st

from shardlab.reference import memory as ref
from shardlab.solutions import memory as sol

pytestmark = pytest.mark.pure

dims = st.integers(1, 65536)
big = st.integers(0, 10**15)


@settings(max_examples=200, deadline=None)
@given(dims, dims, st.integers(1, 512), st.integers(0, 2**22))
def test_shapes(d, f, layers, tokens):
    assert sol.param_count(d, f, layers) == ref.param_count(d, f, layers)
    p = ref.param_count(d, f, layers)
    assert sol.training_state_bytes(p) == ref.training_state_bytes(p)
    assert sol.activation_bytes(d, f, layers, tokens) == ref.activation_bytes(d, f, layers, tokens)


@settings(max_examples=300, deadline=None)
@given(big, st.integers(1, 10**12), big, st.integers(1, 100_000))
def test_devices_and_fsdp(total, device, act, n):
    assert sol.devices_needed(total, device) == ref.devices_needed(total, device)
    assert sol.min_fsdp_degree(total, act, device) == ref.min_fsdp_degree(total, act, device)
    got, want = sol.fsdp_bytes_per_device(total, act, n), ref.fsdp_bytes_per_device(total, act, n)
    assert abs(got - want) <= 1e-9 * max(1.0, abs(want))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**13), st.integers(0, 3), st.integers(1, 100_000))
def test_zero(p, stage, n):
    got, want = sol.zero_bytes_per_device(p, stage, n), ref.zero_bytes_per_device(p, stage, n)
    assert abs(got - want) <= 1e-9 * max(1.0, abs(want))
