"""Figures for the instructor solutions (matplotlib, Agg backend): the memory
breakdown of the course model, from the reference."""
from __future__ import annotations

from pathlib import Path

from shardlab.autograder.kit.timelines.overlap import fit_texts
from shardlab.reference import memory
from shardlab.reference.specs import FP32_BYTES, GB

MEMORY_PNG = "memory-breakdown.png"


def memory_breakdown(cfg) -> dict[str, int]:
    """Bytes per kind of training memory for the course model (one device's tokens)."""
    m = cfg.model
    p = memory.param_count(m.d_model, m.d_ff, m.num_blocks)
    act = memory.activation_bytes(m.d_model, m.d_ff, m.num_blocks, cfg.memory.tokens_per_device)
    fp32 = FP32_BYTES * p
    out = {"FP32 master weights": fp32, "FP32 gradients": fp32, "Adam first moment": fp32,
           "Adam second moment": fp32, "BF16 activations": act}
    assert sum(out.values()) - act == memory.training_state_bytes(p)
    return out


def memory_breakdown_png(cfg, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    parts = memory_breakdown(cfg)
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=120)
    bars = ax.barh(list(parts), [b / GB for b in parts.values()], color=["#4c72b0"] * 4 + ["#dd8452"])
    ax.bar_label(bars, [f"{b / GB:,.1f} GB" for b in parts.values()], padding=3)
    ax.axvline(cfg.memory.gpu.capacity_gb, color="k", ls="--", lw=1,
               label=f"one {cfg.memory.gpu.name} ({cfg.memory.gpu.capacity_gb:g} GB)")
    ax.legend(loc="lower right", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("GB (10^9 bytes)")
    ax.set_title(f"{cfg.model.name}: training memory, {cfg.memory.tokens_per_device:,} tokens per device")
    ax.margins(x=0.2)
    fig.tight_layout()
    fit_texts(fig)          # a long model name never pushes the title past the figure's edge
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
