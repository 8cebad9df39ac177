"""Numbers a course may mean but probably does not: one warning each, naming the key, never an
error (a future chip may pass a bound). A table key's plausible range is declared beside it
(`setting(..., plausible=(low, high, words))`, `sections.HardwareTable`, `sections.NetworkTable`);
besides, a model one of whose layers' BF16 weights (2 · D · F bytes) is larger than every device the
course names holds is warned about, naming [model].d_model and d_ff. `shardlab build` and `shardlab
check` print them (docs/instructor-guide.md)."""
from __future__ import annotations

import json

from shardlab.reference.config.sections import HardwareTable, NetworkTable


def _plausible(declared, key: str) -> tuple[float, float, str] | None:
    """A declared key's plausible range (low, high, in words), or None when it declares none."""
    field = declared.model_fields.get(key)
    extra = field.json_schema_extra if field is not None else None
    bounds = extra.get("plausible") if isinstance(extra, dict) else None
    return (float(bounds[0]), float(bounds[1]), str(bounds[2])) if isinstance(bounds, (list, tuple)) else None


def implausible(cfg) -> list[str]:
    """One sentence per implausible number of the course `cfg` (its own [hardware.NAME] and
    [network.NAME] tables, and its model against its devices)."""
    data = json.loads(cfg.data_json) if cfg.data_json else {}
    out = []
    for section, declared in (("hardware", HardwareTable), ("network", NetworkTable)):
        for name, table in (data.get(section) or {}).items():
            for key, value in (table or {}).items():
                bounds = _plausible(declared, key)
                if bounds and isinstance(value, (int, float)) and not bounds[0] <= value <= bounds[1]:
                    out.append(f"config [{section}.\"{name}\"].{key} = {value:g} is implausible: {bounds[2]}; "
                               "check its unit")
    m = cfg.model
    devices = [cfg.memory.gpu, cfg.memory.fsdp_device, cfg.fsdp.device, cfg.comm4d.device, cfg.pipeline.device]
    largest = max(devices, key=lambda h: h.capacity_bytes)
    layer = 2 * m.d_model * m.d_ff
    if layer > largest.capacity_bytes:
        out.append(f"config [model].d_model = {m.d_model} and d_ff = {m.d_ff} make one layer's BF16 weights "
                   f"{layer / 1e9:,.1f} GB, more than the largest device of the course holds ({largest.name}, "
                   f"{largest.capacity_bytes / 1e9:g} GB): no device could compute one layer")
    return out


# The solutions' own grading spends 5-8 s of student-code time on an idle 2-core machine (the Gradescope
# replay, docs/performance.md: warm 5.3 s, cold 8.3 s), several times that under load; a budget below
# this floor leaves them 0 on whatever does not finish
MIN_BUDGET_SECONDS = 30


def budget_warning(cfg) -> str | None:
    """The sentence for a [grading] budget_seconds too small for the solutions, or None."""
    budget = cfg.grading.budget_seconds
    if budget >= MIN_BUDGET_SECONDS:
        return None
    return (f"config [grading].budget_seconds = {budget} is too small for the solutions: their own grading "
            f"needs 5-8 s of it on an idle machine and several times that under load, and what does not finish "
            f"scores 0; give it at least {MIN_BUDGET_SECONDS}")
