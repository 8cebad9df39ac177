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
    assert ref.activation_bytes(m.d_model, m.d_ff, m.num_blocks, cfg.memory.tokens_per_device) == ACT
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
    # the solutions' realism notes (test_xxl_weight_casts_and_fsdp_buffers derives them)
    assert (w["note_weight_casts"].value, w["note_n_fsdp_buffers"].value) == (437_952_446_464, 67)
    assert "437.95 GB" in w["note_weight_casts"].shown and "0.81 GB" in w["note_fsdp_headroom"].shown


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


# (d, f, blocks, tokens): P = 2·d·f·blocks; state 16P; activations blocks·T·(d + f)·2; the weight casts
# 2·(P − d·f) (every layer's but the first); AdamW's step counters 4 bytes per weight matrix, 4·2·blocks.
REAL_STEPS = [
    # P = 1152: 18,432; 3·5·32·2 = 960; 2·(1152 − 192) = 1920; 24
    ((8, 24, 3, 5), (1152, 18_432, 960, 1920, 24)),
    # P = 2560: 40,960; 2·7·56·2 = 1568; 2·(2560 − 640) = 3840; 16
    ((16, 40, 2, 7), (2560, 40_960, 1568, 3840, 16)),
    # P = 12,288: 196,608; no tokens, no activations; 2·(12,288 − 1536) = 21,504; 32
    ((24, 64, 4, 0), (12_288, 196_608, 0, 21_504, 32)),
]


@pytest.mark.parametrize("shape, want", REAL_STEPS, ids=lambda v: str(v))
def test_a_real_autocast_step_is_every_term_of_the_accounting(shape, want):
    """docs/spec.md, question 1: a real torch.autocast BF16 step with torch.optim.AdamW, every
    byte autograd saves sorted into the weight casts and the activations, each term as derived."""
    measured = measure_training_step(*shape)
    params, state, act, casts, steps = want
    assert measured.num_params == params
    assert measured.state_bytes == state                    # FP32 weights + gradients + two moments
    assert measured.activation_bytes == act                 # the BF16 input of every linear layer
    assert measured.weight_cast_bytes == casts              # a term of its own, 2 B/param but the first layer's
    assert measured.optimizer_step_bytes == steps
    assert measured.saved_bytes == act + casts              # nothing else is saved for backward


@pytest.mark.parametrize("shape, want", REAL_STEPS, ids=lambda v: str(v))
def test_the_formulas_predict_the_measured_terms(shape, want):
    """The reference's formulas, graded (1.1-1.3) and not (the casts), against the same step."""
    d, f, layers, t = shape
    measured = measure_training_step(*shape)
    p = ref.param_count(d, f, layers)
    assert (p, ref.training_state_bytes(p), ref.activation_bytes(d, f, layers, t)) == \
        (measured.num_params, measured.state_bytes, measured.activation_bytes)
    assert ref.weight_cast_bytes(d, f, layers) == measured.weight_cast_bytes


def test_xxl_weight_casts_and_fsdp_buffers():
    """XXL: casts 2·(P − D·F) = 2·(219,848,638,464 − 872,415,232) = 437,952,446,464 bytes (437.95 GB).
    Three BF16 unit buffers, 3·2·872,415,232 = 5,234,491,392. With them (b)'s inequality on a
    95 GB device: N > (2S + A) / (2·(95e9 − 5,234,491,392) − A) = 7,107,030,024,192 / 107,657,423,872
    = 66.02, so N = 67 (66 gives 107,657,423,872 · 66 = 7,105,389,975,552 < 2S + A: too few)."""
    assert ref.weight_cast_bytes(16384, 53248, 126) == 437_952_446_464
    assert ref.fsdp_buffer_bytes(16384, 53248) == 5_234_491_392
    assert ref.min_fsdp_degree_with_buffers(STATE, ACT, 95 * 10**9, 5_234_491_392) == 67
    # at the graded N = 61: 95e9 − (3,553,515,012,096 / 61 + 35,936,796,672) = 808,858,867.4 bytes free,
    # less than one gathered BF16 layer, 2·872,415,232 = 1,744,830,464
    headroom = 95e9 - ref.fsdp_bytes_per_device(STATE, ACT, 61)
    assert abs(headroom - 808_858_867.4) < 1 and headroom < 1_744_830_464
