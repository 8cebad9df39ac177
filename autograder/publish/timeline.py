"""A measured timeline of one training step, per rank: compute against
communication, as a PNG and as a Chrome trace (ui.perfetto.dev or
chrome://tracing open it). The starter kit ships this file.

Input: one list of events per rank, as the tracer records them
(sandbox/gloo/ranks/tracing.py and scenarios' marks), times in seconds of
`time.monotonic()`, one clock for all ranks of a machine:

- {"kind": "collective", "op", "seq", "bytes", "async", "phase", "start", "end"}
  ("end" None: never seen to finish; drawn to the end of the window);
- {"kind": "grad", "param": i, "t"}: parameter i's gradient was accumulated (DDP);
- {"kind": "phase", "name", "t"}: the rank entered a phase. DDP: "step 2" is
  the whole second step; FSDP: "1 forward", "1 backward", "1 finish", "1 optimizer";
- {"kind": "unit", "at": "start" | "end", "i", "t"}: unit i's forward (FSDP).

What the compute lane shows is what was measured, no more. DDP: the step's
start to its first gradient is "forward + backward until the first
gradient"; each later span runs from one gradient-ready instant to the next
(backward of the layers in between). FSDP: each unit's forward, then the
backward phase. "Backward ends" at the last gradient (DDP) or where the
"finish" phase starts (FSDP).
"""
from __future__ import annotations

import json
from pathlib import Path


def step_window(ranks: list[list[dict]], step: str) -> list[list[dict]]:
    """The events of one step on every rank: a DDP phase name ("step 2") or an
    FSDP step index ("1", whose phases are "1 forward" ... "1 optimizer")."""
    def inside(e: dict) -> bool:
        name = e.get("phase") if e["kind"] in ("collective", "grad") else e.get("name")
        return name == step or (isinstance(name, str) and name.split(" ")[0] == step and " " in name)
    out = []
    for events in ranks:
        phases = sorted((e["t"], e) for e in events if e["kind"] == "phase" and inside(e))
        if not phases:
            out.append([])
            continue
        begin = phases[0][0]
        after = [e["t"] for e in events if e["kind"] == "phase" and e["t"] > phases[-1][0] and not inside(e)]
        end = min(after, default=float("inf"))
        out.append([e for e in events if inside(e)
                    or (e["kind"] == "unit" and begin <= e["t"] < end)])
    return out


def _backward_end(events: list[dict]) -> float | None:
    grads = [e["t"] for e in events if e["kind"] == "grad"]
    if grads:
        return max(grads)
    finish = [e["t"] for e in events if e["kind"] == "phase" and e["name"].endswith(" finish")]
    return min(finish) if finish else None


def compute_spans(events: list[dict]) -> list[dict]:
    """The compute lane of one rank: spans {"name", "start", "end", "cat"} (module docstring)."""
    phases = sorted((e["t"], e["name"]) for e in events if e["kind"] == "phase")
    grads = sorted((e["t"], e["param"]) for e in events if e["kind"] == "grad")
    spans = []
    if grads and phases:                                         # DDP
        spans.append(dict(name="forward + backward until the first gradient", start=phases[0][0],
                          end=grads[0][0], cat="forward"))
        for (t0, _), (t1, i) in zip(grads, grads[1:]):
            spans.append(dict(name=f"backward until param {i}'s gradient", start=t0, end=t1, cat="backward"))
        return spans
    starts = {}
    for e in sorted((e for e in events if e["kind"] == "unit"), key=lambda e: e["t"]):
        if e["at"] == "start":
            starts[e["i"]] = e["t"]
        elif e["i"] in starts:
            spans.append(dict(name=f"forward: unit {e['i']}", start=starts.pop(e["i"]), end=e["t"], cat="forward"))
    for (t0, name), (t1, _) in zip(phases, phases[1:] + [(None, None)]):
        stage = name.split(" ", 1)[-1]
        if stage in ("backward", "finish", "optimizer") and t1 is not None:
            spans.append(dict(name=stage, start=t0, end=t1, cat=stage))
    return spans


def comm_spans(events: list[dict]) -> list[dict]:
    """One span per collective; one never seen to finish ends at the window's last event."""
    last = max((e.get("end") or e.get("start") or e.get("t") or 0 for e in events), default=0)
    return [dict(name=f"{e['op']} #{e['seq']} ({e['bytes']:,} B)", start=e["start"],
                 end=e["end"] if e.get("end") is not None else last, finished=e.get("end") is not None,
                 is_async=bool(e["async"]), bytes=e["bytes"], seq=e["seq"], phase=e["phase"])
            for e in events if e["kind"] == "collective"]


def _origin(ranks: list[list[dict]]) -> float:
    times = [e.get("start", e.get("t")) for events in ranks for e in events]
    return min((t for t in times if t is not None), default=0.0)


def chrome_trace(ranks: list[list[dict]], title: str) -> dict:
    """Complete ("X") events in microseconds: pid = rank, tid 0 compute, tid 1 communication;
    gradient-ready instants ("i") on tid 0."""
    t0, out = _origin(ranks), []

    def us(t: float) -> float:
        return round((t - t0) * 1e6, 3)
    for rank, events in enumerate(ranks):
        out.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0, "args": {"name": f"rank {rank}"}})
        for tid, lane in ((0, "compute"), (1, "communication")):
            out.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": tid, "args": {"name": lane}})
        for s in compute_spans(events):
            out.append({"ph": "X", "name": s["name"], "cat": s["cat"], "pid": rank, "tid": 0,
                        "ts": us(s["start"]), "dur": us(s["end"]) - us(s["start"])})
        for s in comm_spans(events):
            out.append({"ph": "X", "name": s["name"], "cat": "collective", "pid": rank, "tid": 1,
                        "ts": us(s["start"]), "dur": us(s["end"]) - us(s["start"]),
                        "args": {"bytes": s["bytes"], "async": s["is_async"], "seq": s["seq"],
                                 "phase": s["phase"], "finished": s["finished"]}})
        out += [{"ph": "i", "s": "t", "name": f"gradient of param {e['param']}", "pid": rank, "tid": 0,
                 "ts": us(e["t"])} for e in events if e["kind"] == "grad"]
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"title": title}}


def overlap_summary(ranks: list[list[dict]]) -> str:
    """One sentence per rank: how many collectives started before backward ended."""
    said = []
    for rank, events in enumerate(ranks):
        end, comms = _backward_end(events), comm_spans(events)
        if end is None or not comms:
            said.append(f"rank {rank}: nothing to compare (no backward or no collective traced)")
            continue
        early = [c for c in comms if c["start"] < end]
        if early:
            lead = (end - min(c["start"] for c in early)) * 1e3
            said.append(f"rank {rank}: {len(early)} of {len(comms)} collectives started before backward "
                        f"ended (the first {lead:.2f} ms before)")
        else:
            said.append(f"rank {rank}: no collective started before backward ended: nothing overlaps")
    return "; ".join(said)


def draw(ranks: list[list[dict]], path, title: str, subtitle: str = "") -> None:
    """The PNG: per rank a compute lane above a communication lane, time in ms."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    t0 = _origin(ranks)
    colors = {"forward": "#9ecae1", "backward": "#3182bd", "finish": "#bdbdbd", "optimizer": "#d9d9d9"}
    fig, ax = plt.subplots(figsize=(11, 1.6 + 1.1 * len(ranks)))
    ticks, labels = [], []
    for rank, events in enumerate(ranks):
        y = 2.4 * (len(ranks) - 1 - rank)
        for s in compute_spans(events):
            ax.broken_barh([((s["start"] - t0) * 1e3, (s["end"] - s["start"]) * 1e3)], (y + 1.1, 0.8),
                           facecolor=colors.get(s["cat"], "#9ecae1"), edgecolor="white")
        for c in comm_spans(events):
            ax.broken_barh([((c["start"] - t0) * 1e3, max((c["end"] - c["start"]) * 1e3, 1e-3))], (y, 0.8),
                           facecolor="#e6550d" if c["is_async"] else "#756bb1", edgecolor="black", linewidth=0.4,
                           hatch=None if c["finished"] else "//")
        end = _backward_end(events)
        if end is not None:
            ax.vlines((end - t0) * 1e3, y - 0.2, y + 2.0, color="black", ls=":", lw=1)
            ax.text((end - t0) * 1e3, y + 2.0, " backward ends", fontsize=7, va="bottom")
        ticks += [y + 0.4, y + 1.5]
        labels += [f"rank {rank} comm", f"rank {rank} compute"]
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color=colors["forward"], label="forward"),
                       Patch(color=colors["backward"], label="backward"),
                       Patch(color="#e6550d", label="collective (async)"),
                       Patch(color="#756bb1", label="collective (blocking)")],
              loc="upper right", fontsize=7, ncol=4)
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_xlabel("milliseconds since the step began")
    ax.set_ylim(-0.3, 2.4 * len(ranks) + 0.6)
    ax.set_title(title + (f"\n{subtitle}" if subtitle else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_timeline(ranks: list[list[dict]], folder, stem: str, title: str) -> tuple[Path, Path]:
    """Write <stem>.png and <stem>.trace.json under `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    png, trace = folder / f"{stem}.png", folder / f"{stem}.trace.json"
    draw(ranks, png, title, overlap_summary(ranks).replace("; ", "\n"))
    trace.write_text(json.dumps(chrome_trace(ranks, title)))
    return png, trace
