"""A measured timeline of one training step, per rank: what each rank computed
against what it communicated, as a PNG and as a Chrome trace (open it in
https://ui.perfetto.dev or chrome://tracing). The starter kit ships this file;
it needs only the standard library (and matplotlib for the PNG).

Input: one list of events per rank, as the tracer records them. Times are
seconds of `time.monotonic()`, one clock for every rank of a machine; the
drawing and the trace count from the earliest event of all ranks.

- {"kind": "collective", "op", "seq", "bytes", "async", "phase", "start", "end"}:
  one torch.distributed call; "end" is None if it was never seen to finish;
- {"kind": "grad", "param": i, "phase", "t"}: parameter i's gradient was
  accumulated (DDP; parameters numbered in model.parameters() order);
- {"kind": "phase", "name", "t"}: the rank entered a phase. DDP: "step 2" is
  the whole second step; FSDP: "1 forward", "1 backward", "1 finish", "1 optimizer";
- {"kind": "unit", "at": "start" | "end", "i", "t"}: unit i's forward (FSDP);
- {"kind": "step", "k", "t"}: FSDP step k (0-based) begins.

The compute lane shows what was measured, no more. DDP: only the instants at
which gradients became ready are known, so the step's start to the first
gradient is "forward (and backward up to the first gradient)", and each
later span runs from one gradient-ready instant to the next ("backward:
param i" ends when param i's gradient is ready). FSDP: each unit's forward,
then the backward, finish and optimizer phases. Backward ends at the last
gradient (DDP) or where the "finish" phase starts (FSDP).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:                       # matplotlib is imported when a figure is drawn, not before
    from matplotlib.artist import Artist

COLORS = {"forward": "#8fb0dc", "backward": "#4c72b0"}      # compute; any other compute is OTHER
OTHER, ASYNC, BLOCKING, EXPOSED, SHADE = "#c4c4c4", "#dd8452", "#8172b3", "#c44e52", "#e8eef6"
LEGEND = ("forward", "backward", "backward (shaded)", "gradient ready", "finish, optimizer", "async collective",
          "blocking collective", "never seen to finish (hatched)", "communication after backward")


def _t(e: dict) -> float:
    return e["t"] if "t" in e else e["start"]


def _last(events: list[dict]) -> float:
    return max((t for e in events for t in (e.get("t"), e.get("start"), e.get("end")) if t is not None),
               default=0.0)


def _origin(ranks: list[list[dict]]) -> float:
    return min((_t(e) for events in ranks for e in events), default=0.0)


def _fsdp(events: list[dict]) -> bool:
    """FSDP phases are "<step> <stage>"; DDP's are "step <k>"."""
    return any(e["kind"] == "phase" and e["name"].split(" ")[0].isdigit() for e in events)


def step_label(step: str) -> str:
    """How a drawing's title names the step drawn: an FSDP step index ("1") as
    "step 1", a DDP phase ("step 2") as it is."""
    return f"step {step}" if step.isdigit() else step


def step_window(ranks: list[list[dict]], step: str) -> list[list[dict]]:
    """The events of one step on every rank: `step` is a DDP phase name
    ("step 2") or an FSDP step index ("1": phases "1 forward" ... "1 optimizer").
    Each rank's list is in time order and ends with the rank's first phase event
    after the step, when there is one: it marks where the step ended."""
    def ours(name) -> bool:
        return name == step or (isinstance(name, str) and name.startswith(step + " "))
    out: list[list[dict]] = []
    for events in ranks:
        events = sorted(events, key=_t)
        mine = [e for e in events if e["kind"] == "phase" and ours(e["name"])]
        if not mine:
            out.append([])
            continue
        after = [e for e in events if e["kind"] == "phase" and e["t"] > mine[-1]["t"]][:1]
        end = after[0]["t"] if after else float("inf")
        out.append([e for e in events if ours(e.get("phase", e.get("name")))
                    or (e["kind"] == "unit" and mine[0]["t"] <= e["t"] < end)
                    or (e["kind"] == "step" and str(e.get("k")) == step)] + after)
    return out


def _span(name: str, start: float, end: float, cat: str) -> dict:
    return {"name": name, "start": start, "end": end, "cat": cat}


def compute_spans(events: list[dict]) -> list[dict]:
    """The compute lane of one rank: spans {"name", "start", "end", "cat"} in
    seconds, in time order (module docstring); "cat" is "forward", "backward",
    "after" (DDP, after the last gradient), "finish", "optimizer" or "other".
    A phase's span ends where the next phase begins, so the last phase of the
    list has none; an FSDP forward phase is drawn as its units' forwards."""
    phases = sorted((e for e in events if e["kind"] == "phase"), key=_t)
    spans = []
    for p, nxt in zip(phases, phases[1:] + [None]):
        grads = sorted((e for e in events if e["kind"] == "grad" and e["phase"] == p["name"]), key=_t)
        stage = p["name"].split(" ", 1)[1] if _fsdp([p]) else None
        if grads:
            spans.append(_span("forward (and backward up to the first gradient)", p["t"], grads[0]["t"], "forward"))
            spans += [_span(f"backward: param {g['param']}", a["t"], g["t"], "backward")
                      for a, g in zip(grads, grads[1:])]
            if nxt:
                spans.append(_span("after backward: finish + optimizer", grads[-1]["t"], nxt["t"], "after"))
        elif nxt and stage != "forward":
            spans.append(_span(stage or p["name"], p["t"], nxt["t"], stage or "other"))
    started = {}
    for e in sorted((e for e in events if e["kind"] == "unit"), key=_t):
        if e["at"] == "start":
            started[e["i"]] = e["t"]
        elif e["i"] in started:
            spans.append(_span(f"forward: unit {e['i']}", started.pop(e["i"]), e["t"], "forward"))
    return sorted(spans, key=lambda s: s["start"])


def comm_spans(events: list[dict]) -> list[dict]:
    """One span per collective, in start order: {"name": "all_reduce #3 (480 B)",
    "start", "end"} in seconds, with "op", "seq", "bytes", "async", "phase",
    "finished" (False: never seen to finish, so drawn to the last event of the
    list) and "track": the first row of the communication lane free when it
    starts (0 unless earlier collectives are still in flight)."""
    spans: list[dict] = []
    free: list[float] = []                    # free[k]: when track k is free again
    for e in sorted((e for e in events if e["kind"] == "collective"), key=_t):
        end = e["end"] if e.get("end") is not None else max(_last(events), e["start"])
        track = next((k for k, t in enumerate(free) if t <= e["start"]), len(free))
        free[track:track + 1] = [end]         # track k's, or a new track's, free time
        spans.append({"name": f"{e['op']} #{e['seq']} ({e['bytes']:,} B)", "start": e["start"], "end": end,
                      "op": e["op"], "seq": e["seq"], "bytes": e["bytes"], "async": bool(e["async"]),
                      "phase": e.get("phase"), "finished": e.get("end") is not None, "track": track})
    return spans


def _backward(events: list[dict]) -> tuple[float | None, float | None]:
    """(start, end) of backward in seconds: DDP's first and last gradient-ready
    instants; FSDP's "k backward" and "k finish" phase starts."""
    grads = [e["t"] for e in events if e["kind"] == "grad"]
    if grads:
        return min(grads), max(grads)
    starts = {e["name"].split(" ")[-1]: e["t"] for e in sorted(events, key=_t, reverse=True) if e["kind"] == "phase"}
    return starts.get("backward"), starts.get("finish")


def chrome_trace(ranks: list[list[dict]], title: str) -> dict:
    """The Chrome trace: "ts" and "dur" in microseconds from the earliest event.
    pid = rank; tid 0 "compute": complete ("X") events, and gradient-ready and
    "backward ends" instants ("i"); tid 1 "communication": one "X" event per
    collective. The format cannot show overlapping events on one thread, so a
    collective started while k others are in flight goes on tid 1 + k."""
    t0, out = _origin(ranks), []

    def us(t: float) -> float:
        return round((t - t0) * 1e6, 3)

    def meta(what: str, pid: int, tid: int, name: str, order: int):    # a name, and the rows' order
        out.append({"ph": "M", "name": f"{what}_name", "pid": pid, "tid": tid, "args": {"name": name}})
        out.append({"ph": "M", "name": f"{what}_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": order}})

    def event(ph: str, name: str, cat: str, pid: int, tid: int, start: float, end: float | None = None, **args):
        out.append({"ph": ph, "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": us(start)}
                   | ({"s": "t"} if end is None else {"dur": round(us(end) - us(start), 3)})
                   | ({"args": args} if args else {}))
    for rank, events in enumerate(ranks):
        meta("process", rank, 0, f"rank {rank}", rank)
        comms = comm_spans(events)
        for tid in range(2 + max((c["track"] for c in comms), default=0)):
            meta("thread", rank, tid, ("compute", "communication")[tid] if tid < 2
                 else f"communication {tid} (overlapping)", tid)
        for s in compute_spans(events):
            event("X", s["name"], s["cat"], rank, 0, s["start"], s["end"])
        for c in comms:
            note = {} if c["finished"] else {"note": "never observed to finish: drawn to the end of the step"}
            event("X", c["name"], "collective", rank, 1 + c["track"], c["start"], c["end"],
                  **{k: c[k] for k in ("bytes", "async", "seq", "phase", "op", "finished")}, **note)
        for e in (e for e in events if e["kind"] == "grad"):
            event("i", f"gradient of param {e['param']} ready", "grad", rank, 0, e["t"], param=e["param"])
        end = _backward(events)[1]
        if end is not None:
            event("i", "backward ends", "marker", rank, 0, end)
    return {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"title": title}}


def _overlap(rank: int, events: list[dict]) -> str:
    comms, end = comm_spans(events), _backward(events)[1]
    if _fsdp(events):                 # the k-th all-gather of forward is taken as unit k's
        units = [s for s in compute_spans(events) if s["name"].startswith("forward: unit")]
        gathers = [c for c in comms if "all_gather" in c["op"] and str(c["phase"]).endswith(" forward")]
        early = [u["end"] - g["start"] for u, g in zip(units[:-1], gathers[1:]) if g["start"] < u["end"] and g["async"]]
        if len(units) < 2:
            return f"rank {rank}: fewer than two nn.Linear forwards traced, nothing to say about prefetch"
        if not early:
            return (f"rank {rank}: no all-gather was issued (async) before the previous unit's forward ended: "
                    "no prefetch, nothing overlaps")
        return (f"rank {rank}: {len(early)} of {len(units) - 1} next-unit all-gathers were issued (async) before "
                f"the previous unit's forward ended (prefetches, the earliest {max(early) * 1e3:.2f} ms before)")
    if end is None or not comms:
        return f"rank {rank}: nothing to compare (no gradient or no collective traced)"
    noun = "all-reduce" if all(c["op"] == "all_reduce" for c in comms) else "collective"
    early = [c for c in comms if c["start"] < end]
    if not early:
        return (f"rank {rank}: no {noun} started before backward ended (the first "
                f"{(comms[0]['start'] - end) * 1e3:.2f} ms after): nothing overlaps")
    blocking = sum(not c["async"] for c in early)
    return (f"rank {rank}: {len(early)} of {len(comms)} {noun}s started before backward ended (the first "
            f"{(end - early[0]['start']) * 1e3:.2f} ms before)"
            + (f", {blocking} of them blocking: backward waited for them" if blocking else ""))


def overlap_summary(ranks: list[list[dict]]) -> str:
    """One clause per rank, joined by "; ". DDP: how many collectives started
    before backward ended. FSDP: how many all-gathers of the next unit were
    issued, async, before the previous unit's forward ended (prefetch)."""
    return "; ".join(_overlap(rank, events) for rank, events in enumerate(ranks))


def _bar(ax, row: float, start: float, length: float, span: float, color, texts, **style) -> None:
    """One bar, labelled with the first of `texts` that fits in it (7.5 pt), if any."""
    ax.broken_barh([(start, max(length, span / 800))], (row - 0.35, 0.7), facecolors=color,
                   edgecolor="white", linewidth=0.8, **style)
    points = ax.get_position().width * ax.figure.get_figwidth() * 72 * length / span
    text = next((t for t in texts if points > 4.6 * len(t) + 4), None)
    if text:
        ax.text(start + length / 2, row, text, ha="center", va="center", fontsize=7.5, color="white")


def _draw_rank(ax, rank: int, events: list[dict], rows: int, ms, span: float) -> None:
    """One rank's rows: compute (row 0), then one row per communication track."""
    ax.set_xlim(-0.01 * span, 1.01 * span)
    ax.set_ylim(rows - 0.5, -0.5)
    ax.set_yticks(range(rows), [f"rank {rank}: compute", "communication"] + ["(overlapping)"] * (rows - 2),
                  fontsize=8.5)
    ax.spines[["top", "right"]].set_visible(False)
    start, end = _backward(events)
    if start is not None and end is not None:
        ax.axvspan(ms(start), ms(end), color=SHADE, zorder=0, label="backward (shaded)")
    for s in compute_spans(events):
        _bar(ax, 0, ms(s["start"]), ms(s["end"]) - ms(s["start"]), span, COLORS.get(s["cat"], OTHER),
             [s["name"], s["name"].rsplit(": ", 1)[-1].split(" (")[0]],
             label=s["cat"] if s["cat"] in COLORS else "finish, optimizer")
    grads = [ms(e["t"]) for e in events if e["kind"] == "grad"]
    if grads:
        ax.plot(grads, [0.42] * len(grads), ls="none", marker="^", ms=4, color="black", label="gradient ready")
    comms = comm_spans(events)
    for c in comms:
        op = c["op"].replace("_into_tensor", "").replace("_single", "").replace("_tensor", "")
        _bar(ax, 1 + c["track"], ms(c["start"]), ms(c["end"]) - ms(c["start"]), span,
             ASYNC if c["async"] else BLOCKING, [f"{op} #{c['seq']}", f"#{c['seq']}"],
             hatch=None if c["finished"] else "//", label="never seen to finish (hatched)" if not c["finished"]
             else "async collective" if c["async"] else "blocking collective")
    if end is None:
        return
    ax.axvline(ms(end), color="black", ls="--", lw=1.2)
    late, said = max((c["end"] for c in comms), default=end), "backward ends"
    if late > end:
        ax.axvspan(ms(end), ms(late), color=EXPOSED, alpha=0.13, lw=0, label="communication after backward")
        said += f", then {ms(late) - ms(end):.2f} ms of communication"
    left = ms(end) < 0.55 * span
    ax.text(ms(end), -0.55, f" {said}" if left else f"{said} ", ha="left" if left else "right", va="bottom",
            fontsize=8, fontweight="bold")


SMALLEST = 0.8          # a text too wide for its figure shrinks to this share of its size, then wraps
LINE_INCH = 1.2 / 72    # inches per point of font size, per line of text (matplotlib's line spacing)
LEAST = 5.0             # points: the smallest `fit_texts` makes a text whose lines pass a figure's top or bottom


@lru_cache(maxsize=8)
def _renderer(dpi: float):
    from matplotlib.backends.backend_agg import RendererAgg
    return RendererAgg(1, 1, dpi)


def text_width(text: str, size: float, weight="normal", dpi: float = 110) -> float:
    """The width in points of the widest line of `text` in matplotlib's font at `size`,
    as a figure of `dpi` draws it (hinting makes widths depend on the pixel size)."""
    from matplotlib.font_manager import FontProperties
    renderer, font = _renderer(dpi), FontProperties(size=size, weight=weight)
    pixels = max(renderer.get_text_width_height_descent(line, font, ismath=False)[0] for line in text.split("\n"))
    return pixels * 72 / dpi


def _wrapped(text: str, width: float, size: float, weight, dpi: float) -> str:
    """`text` with a line break wherever the next word would pass `width` points (a word
    wider than a line is cut)."""
    def fits(line: str) -> bool:
        return text_width(line, size, weight, dpi) <= width
    out = []
    for paragraph in text.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            if fits(f"{line} {word}" if line else word):
                line = f"{line} {word}" if line else word
                continue
            if line:
                out.append(line)
            while len(word) > 1 and not fits(word):
                fit, wide = 1, len(word)                # the longest head that fits, by bisection
                while wide - fit > 1:
                    middle = (fit + wide) // 2
                    fit, wide = (middle, wide) if fits(word[:middle]) else (fit, middle)
                out.append(word[:fit])
                word = word[fit:]
            line = word
        out.append(line)
    return "\n".join(out)


def fitted(text: str, width: float, size: float, weight="normal", dpi: float = 110) -> tuple[str, float]:
    """`text` and a font size at which it fits `width` points on a figure of `dpi`: its
    own `size`, else a smaller one down to SMALLEST of it, else that with its lines
    wrapped."""
    smallest = size * SMALLEST
    wide = text_width(text, size, weight, dpi)
    if wide <= width:
        return text, size
    shrunk = max(smallest, size * width / wide)
    while shrunk > smallest and text_width(text, shrunk, weight, dpi) > width:
        shrunk = max(smallest, shrunk - 0.25)
    if text_width(text, shrunk, weight, dpi) <= width:
        return text, shrunk
    return _wrapped(text, width, smallest, weight, dpi), smallest


def fit_texts(fig, margin: float = 3.0) -> None:
    """Make every horizontal text of `fig` (its titles, the axes' titles and texts) that
    would cross an edge of the figure fit inside it (`margin` points in): shrunk, then
    wrapped (`fitted`), from where it starts if left-aligned, where it ends if
    right-aligned, around its centre if centred; then, if its lines pass the top or
    the bottom, smaller still (down to LEAST points). Call it before saving."""
    from matplotlib.text import Text
    renderer = fig.canvas.get_renderer() if hasattr(fig.canvas, "get_renderer") else None
    if renderer is None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        renderer = FigureCanvasAgg(fig).get_renderer()
    texts = list(fig.texts) + [t for ax in fig.axes for t in ax.get_children() if isinstance(t, Text)]
    right, top, pad = fig.bbox.width, fig.bbox.height, margin * fig.dpi / 72

    def inside(box) -> bool:
        return box.x0 >= pad - 0.5 and box.x1 <= right - pad + 0.5 and box.y0 >= pad - 0.5 and box.y1 <= top - pad

    for t in texts:
        if not t.get_text() or not t.get_visible() or t.get_rotation() % 180:
            continue
        box = t.get_window_extent(renderer)
        if inside(box):
            continue
        align, words, weight = t.get_horizontalalignment(), t.get_text(), t.get_fontweight()
        room = (right - pad - box.x0 if align == "left" else box.x1 - pad if align == "right"
                else 2 * min((box.x0 + box.x1) / 2 - pad, right - pad - (box.x0 + box.x1) / 2))
        width = max(room, 1.0) * 72 / fig.dpi
        text, size = fitted(words, width, t.get_fontsize(), weight, fig.dpi)
        t.set_text(text)
        t.set_fontsize(size)
        while size > LEAST and not inside(t.get_window_extent(renderer)):     # wrapped past the top or bottom
            size = max(LEAST, size - 0.5)
            t.set_text(_wrapped(words, width, size, weight, fig.dpi))
            t.set_fontsize(size)


def draw(ranks: list[list[dict]], path, title: str, subtitle: str = ""):
    """The PNG at `path` (matplotlib's Agg renderer): per rank a compute row
    above the communication rows, time in ms from the earliest event. Shaded
    blue: backward; dashed: where it ends; red: communication still running
    after it ended. Collectives are orange if async, purple if blocking,
    hatched if never seen to finish. A long title or subtitle line shrinks,
    then wraps (`fitted`), and the head grows to hold it. Returns the figure."""
    from matplotlib.figure import Figure        # not pyplot: no global backend or figure list is touched
    t0 = _origin(ranks)

    def ms(t: float) -> float:
        return (t - t0) * 1e3
    rows = [2 + max((c["track"] for c in comm_spans(events)), default=0) for events in ranks]
    span = max((ms(_last(events)) for events in ranks), default=0.0) or 1.0
    room = 0.97 * 10 * 72                       # points from the texts' left (1%) to the right edge, less a margin
    title, size = fitted(title, room, 10, "bold")
    subtitle, small = fitted(subtitle, room, 8) if subtitle else (subtitle, 8)
    extra = LINE_INCH * size * title.count("\n")                               # inches: a wrapped title's lines
    head = 1.05 + extra + 0.17 * (subtitle.count("\n") + 1 if subtitle else 0)  # inches: title, subtitle, legend
    height = head + 0.32 * sum(rows) + 0.5 * len(ranks) + 0.3
    fig = Figure(figsize=(10, height), dpi=110)
    axes = fig.subplots(len(ranks), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": rows})[:, 0]
    fig.subplots_adjust(left=0.16, right=0.98, top=1 - head / height, bottom=0.6 / height,
                        hspace=0.5 / (0.32 * sum(rows) / len(ranks)))
    handles: dict[str, Artist] = {}
    for rank, (ax, events) in enumerate(zip(axes, ranks)):
        _draw_rank(ax, rank, events, rows[rank], ms, span)
        found, labels = ax.get_legend_handles_labels()
        handles.update(zip(labels, found))
    axes[-1].set_xlabel("time since the step began (ms)", fontsize=8.5)
    shown = [label for label in LEGEND if label in handles]
    fig.legend([handles[label] for label in shown], shown, loc="upper center", ncol=min(len(shown), 5),
               fontsize=8, frameon=False, bbox_to_anchor=(0.5, 1 - (head - 0.7) / height))
    fig.text(0.01, 1 - 0.1 / height, title, fontsize=size, fontweight="bold", va="top")
    fig.text(0.01, 1 - (0.33 + extra) / height, subtitle, fontsize=small, va="top")
    fit_texts(fig)
    fig.savefig(path, format="png")
    return fig


def write_timeline(ranks: list[list[dict]], folder, stem: str, title: str) -> tuple[Path, Path]:
    """Write <stem>.png (subtitled with overlap_summary, one line per rank) and
    <stem>.trace.json under `folder`; return their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    png, trace = folder / f"{stem}.png", folder / f"{stem}.trace.json"
    draw(ranks, png, title, overlap_summary(ranks).replace("; ", "\n"))
    trace.write_text(json.dumps(chrome_trace(ranks, title)))
    return png, trace
