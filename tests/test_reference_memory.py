"""Question 1 reference: known values derived by hand from docs/spec.md, and the
accounting checked against a real training step."""
import pytest

from shardlab.reference import memory as ref
from shardlab.reference.memory_measure import measure_training_step

pytestmark = pytest.mark.pure

# XXL: D = 16384, F = 53248, L = 126; 4096 tokens per device.
# D*F = 872,415,232; P = 2*D*F*L = 1,744,830,464 * 126 = 219,848,638,464
P = 219_848_638_464
STATE = 16 * P                       # 3,517,578,215,424 bytes
# act = L*T*(D+F)*2 = 126*4096*69632*2 = 516,096*69632*2 = 71,873,593,344
ACT = 71_873_593_344


def test_default_config_values(cfg):
    m = cfg.model
    assert ref.param_count(m.d_model, m.d_ff, m.num_blocks) == P
    assert ref.training_state_bytes(P) == 3_517_578_215_424
    assert ref.activation_bytes(m.d_model, m.d_ff, m.num_blocks, cfg.tokens_per_device) == ACT
    # 3,517.58 GB / 80 GB = 43.97 -> 44 H100s; with activations 3,589.45 / 80 = 44.87 -> 45
    assert ref.devices_needed(STATE, 80 * 10**9) == 44
    assert ref.devices_needed(STATE + ACT, 80 * 10**9) == 45
    # (2S + A) / (2*95e9 - A) = 7,107,030,024,192 / 118,126,406,656 = 60.17 -> N = 61
    assert ref.min_fsdp_degree(STATE, ACT, 95 * 10**9) == 61
    assert ref.fsdp_bytes_per_device(STATE, ACT, 61) < 95e9 <= ref.fsdp_bytes_per_device(STATE, ACT, 60)


def test_worked_answers_match(cfg):
    w = ref.worked(cfg)
    assert (w["params"].value, w["state"].value, w["activations"].value) == (P, STATE, ACT)
    assert (w["gpus_state"].value, w["gpus_total"].value, w["n_fsdp"].value) == (44, 45, 61)
    assert "3,517.58 GB" in w["state"].shown and "71.87 GB" in w["activations"].shown


def test_edge_cases():
    assert ref.activation_bytes(16384, 53248, 126, 0) == 0
    assert ref.devices_needed(0, 80e9) == 0
    assert ref.devices_needed(1, 80e9) == 1
    assert ref.devices_needed(160e9, 80e9) == 2
    # (100 + 20)/n + 20 < 80 needs n > 2: equality at n = 2 does not fit
    assert ref.min_fsdp_degree(100, 40, 80) == 3
    assert ref.min_fsdp_degree(10, 160, 80) is None      # act/2 == capacity
    assert ref.min_fsdp_degree(10, 0, 80) == 1


def test_zero_stages():
    p, n = 1000, 10
    assert [ref.zero_bytes_per_device(p, s, n) for s in range(4)] == [16000, 5200, 3400, 1600]
    with pytest.raises(ValueError):
        ref.zero_bytes_per_device(p, 4, n)


@pytest.mark.parametrize("d, f, layers, t", [(8, 24, 3, 5), (16, 40, 2, 7), (24, 64, 4, 0)])
def test_real_step_matches_the_formulas(d, f, layers, t):
    """Principle 3: the accounting agrees exactly with a measured BF16 step."""
    measured = measure_training_step(d, f, layers, t)
    assert measured.num_params == 2 * d * f * layers
    assert measured.state_bytes == 16 * 2 * d * f * layers
    assert measured.activation_bytes == layers * t * (d + f) * 2
