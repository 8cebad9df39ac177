"""solutions/comm4d.py is an independent implementation: it must agree with
the reference on many random inputs."""
import math

import pytest
from hypothesis import assume, given, settings, strategies as st

from shardlab.reference import comm4d as ref
from shardlab.solutions import comm4d as sol

pytestmark = pytest.mark.pure

dims = st.integers(1, 65536)
axis = st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128])
m = st.integers(1, 3)
rate = st.floats(1e9, 1e16, allow_nan=False, allow_infinity=False)
tokens = st.integers(0, 2**24)


def same(a, b):
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)


@settings(max_examples=200, deadline=None)
@given(tokens, dims, dims, st.integers(1, 512), axis, axis, rate, rate, m, m)
def test_times(t, d, f, layers, x, y, c, w, mx, my):
    assert sol.forward_flops(t, d, f, layers) == ref.forward_flops(t, d, f, layers)
    assert same(sol.math_seconds(t, d, f, x * y, c), ref.math_seconds(t, d, f, x * y, c))
    assert same(sol.fsdp_comm_seconds(d, f, y, w, mx), ref.fsdp_comm_seconds(d, f, y, w, mx))
    assert same(sol.tp_comm_seconds(t, d, x, w, my), ref.tp_comm_seconds(t, d, x, w, my))


@settings(max_examples=400, deadline=None)
@given(dims, dims, axis, axis, rate, rate, m, m, st.booleans())
def test_min_batch(d, f, x, y, c, w, mx, my, overlap):
    # away from the tie F W M_Y = Y C, where rounding may fall either way
    assume(not math.isclose(f * w * my, y * c, rel_tol=1e-9))
    want = ref.min_batch_compute_bound(d, f, x, y, c, w, mx, my, overlap)
    got = sol.min_batch_compute_bound(d, f, x, y, c, w, mx, my, overlap)
    assert (got is None) == (want is None)
    if want is not None:
        assert abs(got - want) <= 1e-9 * want
        # at the threshold the math just covers the binding communication
        t_math = ref.math_seconds(want, d, f, x * y, c)
        # (an axis of one chip has no collective: its term is 0, docs/spec.md, question 3)
        comm = (0.0 if x == 1 else ref.fsdp_comm_seconds(d, f, y, w, mx),
                0.0 if y == 1 else ref.tp_comm_seconds(want, d, x, w, my))
        binding = max(comm) if overlap else sum(comm)
        assert math.isclose(t_math, binding, rel_tol=1e-9) or (overlap and t_math >= binding)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 4096), dims, st.integers(1, 4096), axis, axis, st.sampled_from([1, 2, 4]))
def test_volumes(per_shard, d, f_per_y, x, y, bpv):
    t, f = per_shard * x, f_per_y * y
    got, want = sol.block_collective_bytes(t, d, f, x, y, bpv), ref.block_collective_bytes(t, d, f, x, y, bpv)
    assert got == want
    # the volumes give the comm times: TP moves 2 (B/X) D values, FSDP 2 D F/Y
    w = 1e11
    tp = (want["allgather_in"] + want["reducescatter_out"]) / w
    fsdp = (want["allgather_w_in"] + want["allgather_w_out"]) / w
    if bpv == 2:
        assert math.isclose(tp, ref.tp_comm_seconds(t, d, x, w, 1), rel_tol=1e-12, abs_tol=1e-300)
        assert math.isclose(fsdp, ref.fsdp_comm_seconds(d, f, y, w, 1), rel_tol=1e-12)
