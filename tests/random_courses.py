"""Random valid courses for property tests (hypothesis): course.toml texts an instructor could write,
from tiny models on consumer GPUs over PCIe to the largest open models on TPUs, with the course's own
devices and networks under names that say nothing of their role. Every text is read by
`load_config`; one it refuses is not a valid course, and the tests `assume` it away."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import strategies as st

from shardlab.autograder.core.errors import ShardlabError
from shardlab.reference.config import load_config

# devices of a course's own: (name, capacity_bytes, flops_per_second, ici_bytes_per_second)
OWN_DEVICES = (("RTX 4090", 24e9, 1.65e14, 0), ("L4", 24e9, 1.21e14, 0), ("Trillium", 32e9, 9.18e14, 9e10),
               ("Big chip", 192e9, 2.3e15, 0))
PRESETS = ("H100", "H200", "A100", "TPU v5p", "TPU v5e")
# the devices with an ICI torus, and its axes (ici_links / 2): a course's [comm4d].m_x + m_y may not exceed them
ICI_DEVICES = {"TPU v5p": 3, "TPU v5e": 2, "Trillium": 2}


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


@st.composite
def course_texts(draw) -> str:
    """One course.toml, valid as far as its numbers go (the rules `load_config` checks hold)."""
    d_model = 128 * draw(st.integers(2, 160))                  # 256 .. 20480
    d_ff = 128 * max(1, round(d_model * draw(st.sampled_from([2.0, 2.67, 4.0, 5.5, 6.5])) / 128))
    num_blocks = draw(st.sampled_from([2, 4, 6, 12, 24, 32, 48, 80, 96, 126]))
    stages = draw(st.sampled_from(_divisors(num_blocks)))
    chunks = draw(st.sampled_from(_divisors(num_blocks // stages)))
    devices = list(PRESETS) + [d[0] for d in OWN_DEVICES]
    pick = lambda: draw(st.sampled_from(devices))             # noqa: E731 - a draw per key
    lines = [f'[hardware."{n}"]\ncapacity_bytes = {c:g}\nflops_per_second = {f:g}\n'
             + (f"ici_bytes_per_second = {i:g}\nici_links = 4\n" if i else "") for n, c, f, i in OWN_DEVICES]
    lines.append('[network."PCIe 4"]\nalpha_seconds = 1e-5\nbeta_bytes_per_second = 2.5e10\ndevices = 4\n')
    lines.append('[network."DC fabric"]\nalpha_seconds = 3e-5\nbeta_bytes_per_second = 1.25e10\ndevices = 64\n')
    nets = ["intra-node", "inter-node", "PCIe 4", "DC fabric"]
    lines.append(f"[model]\nname = \"Random\"\nd_model = {d_model}\nd_ff = {d_ff}\nnum_blocks = {num_blocks}\n")
    lines.append(f"[memory]\ntokens_per_device = {draw(st.sampled_from([256, 1024, 4096, 16384]))}\n"
                 f"gpu = \"{pick()}\"\nfsdp_device = \"{pick()}\"\n")
    one = lambda *values: draw(st.sampled_from(values))       # noqa: E731 - a draw among these values
    lines.append(f"[fsdp]\ndevice = \"{pick()}\"\ntokens_per_device = {one(512, 4096, 32768)}\n"
                 f"intra_network = \"{one(*nets)}\"\ninter_network = \"{one(*nets)}\"\n"
                 f"intra_devices = {one(1, 2, 8)}\ninter_devices = {one(1, 16, 256)}\n")
    chip = one(*ICI_DEVICES)
    m_x = draw(st.integers(1, ICI_DEVICES[chip] - 1))         # leaves m_y at least one axis
    lines.append(f"[comm4d]\ndevice = \"{chip}\"\nx = {one(1, 4, 16, 64)}\ny = {one(1, 2, 4, 8)}\n"
                 f"m_x = {m_x}\nm_y = {draw(st.integers(1, ICI_DEVICES[chip] - m_x))}\n"
                 f"overlap = {one('true', 'false')}\n")
    lines.append(f"[buckets]\nmodel_bytes = {one(1e5, 4e7, 4e8, 2.8e9):g}\nbandwidth = {one(1.25e10, 1e11):g}\n"
                 f"call_overhead_us = {one(10, 50, 200)}\n")
    lines.append(f"[pipeline]\nstages = {stages}\nchunks = {chunks}\nmicrobatches = {one(1, 4, 24, 64)}\n"
                 f"tokens_per_microbatch = {one(512, 4096)}\ndevice = \"{pick()}\"\n"
                 f"target_bubble_percent = {one(1, 3, 10, 50)}\n")
    return "\n".join(lines)


def load_course(text: str):
    """The course of `text`, or None when `load_config` refuses it (then it is no valid course)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "course.toml"
        path.write_text(text)
        try:
            return load_config(path)
        except ShardlabError:
            return None
