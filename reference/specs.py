"""Hardware and model presets.

Units: bytes, seconds, FLOP/s, bytes/s. GB means 10**9 bytes ("H100 80 GB" is
80e9 bytes), never GiB.
"""
from __future__ import annotations

from dataclasses import dataclass

GB = 10**9          # device capacities are quoted in decimal gigabytes
MiB = 2**20         # bucket sizes ("bucket_cap_mb") are binary megabytes
BF16_BYTES = 2
FP32_BYTES = 4


@dataclass(frozen=True)
class Hardware:
    """One accelerator.

    capacity_bytes: HBM in bytes. flops_per_second: dense BF16 peak C.
    hbm_bytes_per_second: HBM bandwidth (shown, not yet used by a question).
    ici_bytes_per_second: bidirectional bandwidth of one inter-chip link
    (W_ici), 0 for a device without ICI (a GPU). ici_links: ICI links per
    chip (4 on a 2D torus, 6 on a 3D torus), 0 without ICI.
    A course defines its own in `[hardware.NAME]` tables (`reference.config`).
    """

    name: str
    capacity_bytes: int
    flops_per_second: float = 0.0
    ici_bytes_per_second: float = 0.0
    hbm_bytes_per_second: float = 0.0
    ici_links: int = 0

    @property
    def capacity_gb(self) -> float:
        return self.capacity_bytes / GB

    @property
    def torus_axes(self) -> int:
        """Axes of the chip's ICI torus, two links (one each way) per axis: 3 on a
        3D torus (6 links), 2 on a 2D torus (4 links), 0 without ICI. A 4D mesh
        spreads its X and Y collectives over M_X + M_Y of them at most."""
        return self.ici_links // 2


@dataclass(frozen=True)
class ModelConfig:
    """The exercise's FFN-only transformer: num_blocks blocks of two bias-free
    linear layers, W_in: d_model -> d_ff and W_out: d_ff -> d_model."""

    name: str
    d_model: int
    d_ff: int
    num_blocks: int


HARDWARE: dict[str, Hardware] = {
    h.name: h
    for h in (
        # SXM parts, dense BF16 (no sparsity), as vendors' data sheets quote them
        Hardware("H100", capacity_bytes=80 * GB, flops_per_second=9.89e14, hbm_bytes_per_second=3.35e12),
        Hardware("H200", capacity_bytes=141 * GB, flops_per_second=9.89e14, hbm_bytes_per_second=4.8e12),
        Hardware("A100", capacity_bytes=80 * GB, flops_per_second=3.12e14, hbm_bytes_per_second=2.039e12),
        # TPU v5p: C = 4.6e14 and 95 GB are the seed handout's figures and Google's published ones
        # (459 TFLOP/s of BF16, 95 GB of HBM2e: docs/decisions.md); the Scaling Book's TPU table says
        # 4.59e14 and 96 GB. W_ici = 2 x 9e10 (both directions of one link) is the book's. v5p is a
        # 3D torus (6 links, 3 mesh axes), v5e a 2D torus (4 links, 2 axes), as Google and the book say
        Hardware("TPU v5p", capacity_bytes=95 * GB, flops_per_second=4.6e14,
                 ici_bytes_per_second=2 * 9e10, hbm_bytes_per_second=2.8e12, ici_links=6),
        Hardware("TPU v5e", capacity_bytes=16 * GB, flops_per_second=1.97e14,
                 ici_bytes_per_second=2 * 4.5e10, hbm_bytes_per_second=8.1e11, ici_links=4),
    )
}

MODELS: dict[str, ModelConfig] = {
    m.name: m
    for m in (
        ModelConfig("XXL", d_model=16384, d_ff=53248, num_blocks=126),
        # small enough to run for real on a laptop CPU (the real-run checks)
        ModelConfig("tiny", d_model=8, d_ff=24, num_blocks=3),
    )
}


@dataclass(frozen=True)
class Network:
    """The lecture's alpha-beta model of a collective: a message of m bytes
    among p devices costs alpha * log2(p) + m / beta seconds.
    alpha: latency per hop (s); beta: bandwidth per device (bytes/s);
    devices: how many devices it usually joins (the FSDP question's p when
    the course names no other). A course defines its own in `[network.NAME]`."""

    name: str
    alpha: float
    beta: float
    devices: int = 0


NETWORKS: dict[str, Network] = {
    n.name: n
    for n in (
        # within one 8-GPU node: NVLink, ~450 GB/s each way per H100
        Network("intra-node", alpha=5e-6, beta=450e9, devices=8),
        # across nodes: one 400 Gb/s InfiniBand NIC per GPU, ~50 GB/s
        Network("inter-node", alpha=2e-5, beta=50e9, devices=64),
    )
}
