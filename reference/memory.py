"""Question 1 — memory accounting for the FFN-only model, as an answer key.

Conventions (docs/spec.md): bytes throughout, GB = 1e9 bytes; FP32 = 4 bytes,
BF16 = 2 bytes. Training state is FP32 master weights, FP32 accumulated
gradients and two FP32 AdamW moments (16 bytes/param). Activations saved for
backward are the BF16 inputs of each linear layer; no checkpointing.

Autocast's BF16 weight casts are a term of their own (`weight_cast_bytes`):
autograd saves them for backward too, but neither the training state (1.2)
nor the activations (1.3) count them. The realism notes of `worked` (shown in
the solutions only) set the graded answers beside what a real run needs.
"""
from __future__ import annotations

from fractions import Fraction

from shardlab.reference.derivation import Worked, gb, n
from shardlab.reference.specs import BF16_BYTES, FP32_BYTES

TRAINING_BYTES_PER_PARAM = 4 * FP32_BYTES   # master + grad + Adam m + Adam v
ZERO_OPTIMIZER_BYTES_PER_PARAM = 12          # K: FP32 master copy + two FP32 moments
WEIGHT_CAST_BYTES_PER_PARAM = BF16_BYTES      # autocast's BF16 copy of a weight, saved for backward
FSDP_UNIT_BUFFERS = 3   # BF16 unit-sized buffers an FSDP device holds besides its shards (`fsdp_buffer_bytes`)
# the realism note's full transformer layer (`transformer_layer_activation_bytes`): the course model has no
# heads, so the note assumes the usual head width of 128 (a = d_model / 128) and one sequence per device
HEAD_DIM = 128


def param_count(d_model: int, d_ff: int, num_blocks: int) -> int:
    """Parameters: each block has W_in (d_model x d_ff) and W_out (d_ff x d_model)."""
    return 2 * d_model * d_ff * num_blocks


def training_state_bytes(num_params: int) -> int:
    """FP32 master weights, gradients, Adam first and second moment: 16 B/param."""
    return TRAINING_BYTES_PER_PARAM * num_params


def activation_bytes(d_model: int, d_ff: int, num_blocks: int, tokens: int) -> int:
    """BF16 inputs of both linear layers of every block, saved for backward:
    num_blocks * tokens * (d_model + d_ff) * 2. A block's output is the next
    block's input and is counted once; the last block's output is not saved."""
    return num_blocks * tokens * (d_model + d_ff) * BF16_BYTES


def weight_cast_bytes(d_model: int, d_ff: int, num_blocks: int) -> int:
    """Bytes of autocast's BF16 weight casts autograd saves for backward:
    2 * (P - d_model * d_ff). A layer's backward needs its weight to compute
    its input's gradient, so the cast is kept for every layer whose input
    needs a gradient: every layer but the first, whose input is the data.
    Measured on a real autocast step (`memory_measure`); not part of the
    training state (1.2) nor of the activations (1.3)."""
    return WEIGHT_CAST_BYTES_PER_PARAM * (param_count(d_model, d_ff, num_blocks) - d_model * d_ff)


def devices_needed(total_bytes: float, device_bytes: float) -> int:
    """ceil(total / device) computed exactly; 0 bytes need 0 devices."""
    q = Fraction(total_bytes) / Fraction(device_bytes)
    return -((-q.numerator) // q.denominator)


def fsdp_bytes_per_device(state_bytes: float, activation_bytes: float, n_fsdp: int) -> float:
    """(state + act/2) / n + act/2: states and every second layer's activations
    sharded over n devices, the other half of the activations replicated."""
    return (state_bytes + activation_bytes / 2) / n_fsdp + activation_bytes / 2


def min_fsdp_degree(state_bytes: float, activation_bytes: float, device_bytes: float) -> int | None:
    """Smallest n >= 1 with (S + A/2)/n + A/2 < D (strict), or None.

    Rearranged exactly: n > (2S + A) / (2D - A), which needs 2D > A; so
    n = floor((2S + A) / (2D - A)) + 1. Exact rationals avoid float ties."""
    s, a, d = Fraction(state_bytes), Fraction(activation_bytes), Fraction(device_bytes)
    if 2 * d - a <= 0:
        return None
    q = (2 * s + a) / (2 * d - a)
    return q.numerator // q.denominator + 1


def fsdp_buffer_bytes(d_model: int, d_ff: int) -> int:
    """Bytes an FSDP device holds beside its shards while it runs one unit (one
    linear layer, d_model * d_ff parameters), whatever the degree N, in BF16:
    the unit's gathered weights, the next unit's weights being prefetched, and
    the unit's unsharded gradient awaiting its reduce-scatter (gradient
    communication is BF16): FSDP_UNIT_BUFFERS * 2 * d_model * d_ff. Question 1 (b)
    leaves them out; the solutions' realism note counts them."""
    return FSDP_UNIT_BUFFERS * BF16_BYTES * d_model * d_ff


def min_fsdp_degree_with_buffers(state_bytes: float, activation_bytes: float, device_bytes: float,
                                 buffer_bytes: float) -> int | None:
    """Smallest n with (S + A/2)/n + A/2 + buffers < D, or None: (b)'s inequality on a
    device smaller by the buffers, n > (2S + A) / (2(D - buffers) - A), exactly. (Not
    routed through min_fsdp_degree: the graded function's calls are the handout's
    problems, which the no-giveaway test records.)"""
    s, a = Fraction(state_bytes), Fraction(activation_bytes)
    room = 2 * (Fraction(device_bytes) - Fraction(buffer_bytes)) - a
    if room <= 0:
        return None
    q = (2 * s + a) / room
    return q.numerator // q.denominator + 1


def min_fsdp_degree_global_batch(state_bytes: float, global_activation_bytes: float,
                                 device_bytes: float) -> int:
    """Smallest n with (S + a/2)/n + a/2 < D where a = A/n: (b) read with the tokens as the global
    batch, split over the n devices, so each device saves A/n of activations. Not graded: the
    hand-grading notes of 1 (b) accept this reading when an answer states it. Searched upwards from 1;
    n0 = floor((S + A)/D) + 1 always fits (S/n0 + A/(2 n0^2) + A/(2 n0) <= (S + A)/n0 < D)."""
    s, a, d = Fraction(state_bytes), Fraction(global_activation_bytes), Fraction(device_bytes)
    bound = (s + a) / d
    last = bound.numerator // bound.denominator + 1
    return next(k for k in range(1, last + 1) if (s + a / (2 * k)) / k + a / (2 * k) < d)


def transformer_layer_activation_bytes(seq_len: int, batch: int, hidden: int, heads: int) -> int:
    """Korthikanti et al. (2022), the activations one transformer layer saves for backward
    (16-bit values, no recomputation, no tensor or sequence parallelism): s·b·h·(34 + 5·a·s/h)
    = 34·s·b·h + 5·a·s²·b bytes. Its 34 counts attention, the norms, dropout masks and a 4h MLP;
    5·a·s²·b is the attention scores and softmax (which fused attention kernels do not store).
    Not graded: the realism note of 1 (a) sets the FFN-only count beside it."""
    return 34 * seq_len * batch * hidden + 5 * heads * seq_len ** 2 * batch


def zero_bytes_per_device(num_params: int, stage: int, n_dp: int) -> float:
    """Mixed-precision AdamW under ZeRO (K = 12 optimizer bytes/param):
    stage 0: 2P + 2P + 12P = 16P; 1: 4P + 12P/n; 2: 2P + 14P/n; 3: 16P/n."""
    p, k = num_params, ZERO_OPTIMIZER_BYTES_PER_PARAM
    per_stage = {
        0: 2 * p + 2 * p + k * p,
        1: 2 * p + 2 * p + k * p / n_dp,
        2: 2 * p + (2 + k) * p / n_dp,
        3: (2 + 2 + k) * p / n_dp,
    }
    if stage not in per_stage:
        raise ValueError(f"ZeRO stage must be 0, 1, 2 or 3, got {stage}")
    return per_stage[stage]


def worked(cfg) -> dict[str, Worked]:
    """The answers to parts (a) and (b) for the course config, with derivations."""
    m = cfg.model
    d, f, layers, t = m.d_model, m.d_ff, m.num_blocks, cfg.memory.tokens_per_device
    gpu, tpu = cfg.memory.gpu, cfg.memory.fsdp_device
    p = param_count(d, f, layers)
    state = training_state_bytes(p)
    act = activation_bytes(d, f, layers, t)
    total = state + act
    n_fsdp = min_fsdp_degree(state, act, tpu.capacity_bytes)
    out = {
        "params": Worked("parameters", "P = 2 · D · F · L",
                         f"2 · {n(d)} · {n(f)} · {n(layers)}", p, f"{n(p)} parameters"),
        "state": Worked("master weights + gradients + Adam moments (FP32)", "16 · P",
                        f"16 · {n(p)}", state, gb(state)),
        "activations": Worked("activations saved for backward (BF16)", "L · T · (D + F) · 2",
                              f"{n(layers)} · {n(t)} · ({n(d)} + {n(f)}) · 2", act, gb(act)),
        "total": Worked("total", "16 · P + activations", f"{n(state)} + {n(act)}", total, gb(total)),
        "gpus_state": Worked(f"{gpu.name} devices for the training state",
                             f"ceil(16P / {gpu.capacity_gb:g} GB)",
                             f"ceil({n(state)} / {n(gpu.capacity_bytes)})",
                             devices_needed(state, gpu.capacity_bytes),
                             f"{devices_needed(state, gpu.capacity_bytes)} × {gpu.name}"),
        "gpus_total": Worked(f"{gpu.name} devices for state and activations",
                             f"ceil((16P + act) / {gpu.capacity_gb:g} GB)",
                             f"ceil({n(total)} / {n(gpu.capacity_bytes)})",
                             devices_needed(total, gpu.capacity_bytes),
                             f"{devices_needed(total, gpu.capacity_bytes)} × {gpu.name}"),
        "fsdp_expression": Worked("memory per device with FSDP degree N",
                                  "(16P + act/2) / N + act/2",
                                  f"({n(state)} + {n(act // 2)}) / N + {n(act // 2)}",
                                  None, "bytes per device"),
    }
    if n_fsdp is None:
        out["n_fsdp"] = Worked(f"smallest N with memory < {tpu.name} ({tpu.capacity_gb:g} GB)",
                               "need act/2 < capacity", f"{n(act // 2)} >= {n(tpu.capacity_bytes)}",
                               None, "no FSDP degree fits: the replicated half of the activations "
                                     "alone exceeds one device")
    else:
        per_dev = fsdp_bytes_per_device(state, act, n_fsdp)
        out["n_fsdp"] = Worked(f"smallest N with memory < {tpu.name} ({tpu.capacity_gb:g} GB)",
                               "N = floor((2·16P + act) / (2·capacity − act)) + 1",
                               f"floor(({n(2 * state)} + {n(act)}) / ({n(2 * tpu.capacity_bytes)} − {n(act)})) + 1",
                               n_fsdp, f"N = {n_fsdp} ({gb(per_dev)} per device)")
    out.update(_realism_notes(cfg, p, state, act, n_fsdp))
    return out


def _realism_notes(cfg, p: int, state: int, act: int, n_fsdp: int | None) -> dict[str, Worked]:
    """What (a) and (b) leave out on purpose, with the realistic figure beside the graded
    one (keys "note_...": the solutions print them, answers.toml does not ask for them)."""
    m, tpu = cfg.model, cfg.memory.fsdp_device
    d, f, layers = m.d_model, m.d_ff, m.num_blocks
    casts = weight_cast_bytes(d, f, layers)
    buffers = fsdp_buffer_bytes(d, f)
    cap = tpu.capacity_bytes
    out = {
        "note_weight_casts": Worked(
            "autocast's BF16 weight casts, saved for backward (every layer's but the first)",
            "2 · (P − D·F)", f"2 · ({n(p)} − {n(d)} · {n(f)})", casts, gb(casts)),
        "note_fsdp_buffers": Worked(
            "BF16 buffers of one FSDP device beside its shards: a unit gathered, the next prefetched, "
            "a unit's unsharded gradient", "3 · 2 · D · F", f"3 · 2 · {n(d)} · {n(f)}", buffers, gb(buffers)),
    }
    if n_fsdp is not None:
        headroom = cap - fsdp_bytes_per_device(state, act, n_fsdp)
        out["note_fsdp_headroom"] = Worked(
            f"headroom one {tpu.name} keeps at N = {n_fsdp}", "capacity − ((16P + act/2) / N + act/2)",
            f"{n(cap)} − (({n(state)} + {n(act // 2)}) / {n_fsdp} + {n(act // 2)})", headroom, gb(headroom))
        layers = headroom / (2 * d * f)      # how many one-layer BF16 buffers that headroom holds: the
        out["note_fsdp_headroom_layers"] = Worked(   # handout's sentence on it depends on it (memory.md.j2)
            f"one-layer BF16 buffers the headroom at N = {n_fsdp} holds", "headroom / (2 · D · F)",
            f"{n(headroom)} / (2 · {n(d)} · {n(f)})", layers, f"{layers:.2f} layers")
    out.update(_transformer_note(cfg, act))
    if n_fsdp is not None:      # 1 (b)'s hand-grading notes: the tokens read as the global batch
        n_global = min_fsdp_degree_global_batch(state, act, cap)
        out["note_n_fsdp_global_batch"] = Worked(
            f"smallest N if the {n(cfg.memory.tokens_per_device)} tokens were the global batch, split over the N "
            "devices (activations act/N per device)",
            "(16P + act/(2N)) / N + act/(2N) < capacity",
            f"({n(state)} + {n(act)}/(2N)) / N + {n(act)}/(2N) < {n(cap)}", n_global, f"N = {n_global}")
    n_real = min_fsdp_degree_with_buffers(state, act, cap, buffers)
    out["note_n_fsdp_buffers"] = Worked(
        f"smallest N with the buffers counted, memory < {tpu.name} ({tpu.capacity_gb:g} GB)",
        "N = floor((2·16P + act) / (2·(capacity − buffers) − act)) + 1",
        f"floor(({n(2 * state)} + {n(act)}) / (2 · ({n(cap)} − {n(buffers)}) − {n(act)})) + 1", n_real,
        "no FSDP degree fits: the replicated activations and the buffers alone exceed one device"
        if n_real is None else f"N = {n_real}")
    return out


def _transformer_note(cfg, act: int) -> dict[str, Worked]:
    """1 (a)'s activations beside a full transformer layer's (Korthikanti et al., 2022), for the
    course's width and depth, one sequence of the course's tokens per device, a = D / HEAD_DIM heads."""
    m, t = cfg.model, cfg.memory.tokens_per_device
    d, layers = m.d_model, m.num_blocks
    heads = max(1, d // HEAD_DIM)
    full = layers * transformer_layer_activation_bytes(t, 1, d, heads)
    no_scores = layers * 34 * t * d
    return {
        "note_transformer_activations": Worked(
            f"activations of {n(layers)} full transformer layers (Korthikanti et al.), one sequence of "
            f"s = {n(t)} tokens, a = D/{HEAD_DIM} = {heads} heads", "L · (34·s·b·h + 5·a·s**2·b), b = 1",
            f"{n(layers)} · (34 · {n(t)} · {n(d)} + 5 · {heads} · {n(t)}²)", full,
            f"{gb(full)}: the FFN-only count is {100 * act / full:.1f} % of it"),
        "note_transformer_activations_no_scores": Worked(
            "the same without the attention scores (a fused attention kernel stores none)",
            "L · 34·s·b·h", f"{n(layers)} · 34 · {n(t)} · {n(d)}", no_scores,
            f"{gb(no_scores)}: the FFN-only count is {100 * act / no_scores:.1f} % of it"),
    }
