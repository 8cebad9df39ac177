"""Question 4's analytic functions: hand-derived values from docs/spec.md, and the
reference against the solutions on random inputs."""
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shardlab.reference import buckets as ref
from shardlab.reference.config import load_config
from shardlab.solutions import buckets as sol

pytestmark = pytest.mark.pure


# ---- assign_buckets: worked by hand from "filled in reverse order; join unless that exceeds the cap"

@pytest.mark.parametrize("sizes, cap, layout", [
    ([4, 4, 4], 8, [[2, 1], [0]]),                        # 4 + 4 = 8 does not exceed 8
    ([240, 40, 160, 48, 12], 256, [[4, 3, 2], [1], [0]]),  # 12+48+160 = 220; +40 = 260 > 256
    ([256, 256, 32, 32], 320, [[3, 2, 1], [0]]),           # 32+32+256 = 320 fits exactly
    ([100, 5000, 100], 1000, [[2], [1], [0]]),             # the 5000-byte parameter sits alone
    ([500, 500, 500, 500], 1000, [[3, 2], [1, 0]]),
    ([64] * 3, 1, [[2], [1], [0]]),                        # a cap below every parameter
    ([64] * 3, 25 * 2**20, [[2, 1, 0]]),                   # one bucket
    ([], 1024, []),                                        # no trainable parameters
])
@pytest.mark.parametrize("impl", [ref, sol], ids=["reference", "solutions"])
def test_assign_buckets_by_hand(impl, sizes, cap, layout):
    assert impl.assign_buckets(sizes, cap) == layout


# ---- the cost model with s = 4e8 B, w = 1e10 B/s, o = 50 us (the default course)
S, W, O = 400_000_000, 1e10, 50e-6  # noqa: E741 - the handout's s, w, o


@pytest.mark.parametrize("impl", [ref, sol], ids=["reference", "solutions"])
def test_formulas_by_hand(impl):
    assert impl.ddp_overhead_seconds(S, W, O, 1) == pytest.approx(50e-6 + 0.04, rel=1e-12)
    assert impl.ddp_overhead_seconds(S, W, O, 20) == pytest.approx(20 * 50e-6 + 0.002, rel=1e-12)
    assert impl.optimal_num_buckets(S, W, O) == pytest.approx(math.sqrt(800), rel=1e-12)  # 4e8 / 5e5
    assert impl.optimal_bucket_bytes(S, W, O) == pytest.approx(math.sqrt(2e14), rel=1e-12)  # 4e8·5e5


def test_worked_answers_of_the_default_course():
    w = ref.worked(load_config())
    assert w["overhead_one"].value == pytest.approx(0.04005)
    assert w["n_opt"].value == pytest.approx(28.2843, rel=1e-5)
    assert w["b_opt"].value == pytest.approx(14_142_135.6, rel=1e-8)
    assert w["b_opt"].shown == "14,142,136 bytes = 13.49 MB"
    assert w["overhead_opt"].value == pytest.approx(2 * math.sqrt(2e-6))   # 2·sqrt(s·o/w)


# ---- reference vs solutions, and the layout's invariants, on random inputs

sizes = st.lists(st.integers(min_value=1, max_value=2**24), max_size=60)
caps = st.one_of(st.integers(min_value=1, max_value=2**26), st.floats(min_value=0.5, max_value=2**26))


@settings(max_examples=300, deadline=None)
@given(sizes, caps)
def test_assign_buckets_agree_and_are_a_reverse_partition(param_bytes, cap):
    layout = ref.assign_buckets(param_bytes, cap)
    assert sol.assign_buckets(param_bytes, cap) == layout
    assert [i for bucket in layout for i in bucket] == list(reversed(range(len(param_bytes))))
    for k, bucket in enumerate(layout):
        total = sum(param_bytes[i] for i in bucket)
        assert total <= cap or len(bucket) == 1            # only a lone parameter exceeds the cap
        if k + 1 < len(layout):                            # the next parameter did not fit
            assert total + param_bytes[layout[k + 1][0]] > cap


model = st.tuples(st.floats(1e3, 1e12), st.floats(1e8, 1e12), st.floats(1e-7, 1e-2))


@settings(max_examples=200, deadline=None)
@given(model, st.integers(1, 10_000))
def test_formulas_agree(args, num_buckets):
    s, w, o = args
    assert sol.ddp_overhead_seconds(s, w, o, num_buckets) == pytest.approx(
        ref.ddp_overhead_seconds(s, w, o, num_buckets), rel=1e-9)
    n_opt = ref.optimal_num_buckets(s, w, o)
    assert sol.optimal_num_buckets(s, w, o) == pytest.approx(n_opt, rel=1e-9)
    assert sol.optimal_bucket_bytes(s, w, o) == pytest.approx(ref.optimal_bucket_bytes(s, w, o), rel=1e-9)
    # the optimum is a minimum of the model, where both terms are equal
    best = ref.ddp_overhead_seconds(s, w, o, n_opt)
    assert best <= ref.ddp_overhead_seconds(s, w, o, n_opt * 1.01) * (1 + 1e-12)
    assert best <= ref.ddp_overhead_seconds(s, w, o, n_opt / 1.01) * (1 + 1e-12)
    assert n_opt * o == pytest.approx(s / (n_opt * w), rel=1e-9)
