"""Benchmark (not a test): `shardlab report DIR` on a synthetic class of 600.

    .venv/bin/python bench/class_report.py --graded GRADED [--students 600] [--copies 6] [--out DIR]

GRADED is a real batch folder (`shardlab grade ... --out GRADED`, e.g. of the
corpus bench/batch_throughput.py zips: solutions, stubs and every fixture of
tests/submissions/). Each synthetic student takes one of its graded results
and that submission's code, in turn, and changes the code as students differ:

- every local name renamed (`_renamed`), the top-level functions and classes
  of each module shuffled (`_shuffled`): what a copier does to hide a copy,
  and what the normaliser must see through;
- a few helper functions of its own whose bodies are random arithmetic
  (`_own_helpers`): the code no one else wrote. The synthetic code is never
  run, only compared, so a shuffle that breaks an import order does not matter;
- a writeup of random sentences (`_writeup`).

Then `--copies` planted copies: a student whose code and writeup are another
synthetic student's, renamed and shuffled again (one word of the writeup
changed). The report must find exactly those pairs.

It prints the time of the first `shardlab report` (cold: it reads every
upload and keeps its sources), then farm-bench's median of --runs warm runs
(no warm-up: the warm run above is one)
against a class of 3 made the same way (the fixed costs: imports, plots,
the page), the peak of the report's whole process tree (summed PSS,
`platforms.process_memory`), and which planted pairs were found.
"""
from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = ("shard gradient bucket device memory bandwidth overlap pipeline stage bubble activation optimizer "
         "state rank collective latency compute batch token layer weight step schedule reduce gather "
         "scatter buffer stream prefetch checkpoint").split()
NAME = re.compile(r"^\s+([a-z_][a-z0-9_]*)\s*(?::[^=]+)?=[^=]", re.M)


def _renamed(text: str, rng: random.Random) -> str:
    """Every name assigned inside a function renamed (whole words)."""
    for old in sorted(set(NAME.findall(text)), key=len, reverse=True):
        if old not in ("self", "_"):
            text = re.sub(rf"\b{old}\b", f"{rng.choice(WORDS)}_{rng.randrange(100)}", text)
    return text


def _shuffled(text: str, rng: random.Random) -> str:
    """The module's top-level blocks (def, class, decorated) in random order, after its header."""
    head, *blocks = re.split(r"\n(?=(?:def |class |@))", text)
    rng.shuffle(blocks)
    return "\n".join([head, *blocks])


def _expression(rng: random.Random, names: list[str], depth: int = 3) -> str:
    if depth == 0 or rng.random() < 0.2:
        return rng.choice([*names, str(rng.randrange(1, 9)), f"len({rng.choice(names)})"])
    op = rng.choice(["+", "-", "*", "//", "%"])
    if rng.random() < 0.25:
        return f"{rng.choice(['min', 'max', 'abs'])}({_expression(rng, names, depth - 1)})"
    return f"({_expression(rng, names, depth - 1)} {op} {_expression(rng, names, depth - 1)})"


def _own_helpers(rng: random.Random, count: int = 3) -> str:
    out = []
    for k in range(count):
        names = ["a", "b", "c"]
        body = [f"    {n} = {_expression(rng, names)}" for n in ("a", "b", "c", "a")]
        out.append(f"\n\ndef _helper_{k}_{rng.randrange(10**6)}(a, b, c):\n" + "\n".join(body)
                   + f"\n    return {_expression(rng, names, 2)}\n")
    return "".join(out)


def _writeup(rng: random.Random, parts: list[str]) -> dict[str, str]:
    return {p: " ".join(rng.choice(WORDS) for _ in range(rng.randrange(25, 60))) + "." for p in parts}


def _code(files: dict[str, str], rng: random.Random, own: bool = True) -> dict[str, str]:
    return {name: _shuffled(_renamed(text, rng), rng) + (_own_helpers(rng) if own else "")
            for name, text in files.items()}


def _templates(graded: Path) -> list[tuple[dict, dict[str, str]]]:
    """(result, code) of every submission of GRADED graded with code."""
    from shardlab.autograder.publish.class_report import kept_sources, load_batch
    batch = load_batch(graded)
    found = []
    for name, record in sorted(batch.attempted.items()):
        files = kept_sources(graded, name, record)
        if files:
            found.append((record, files))
    if not found:
        sys.exit(f"{graded}: no graded submission whose code is still there")
    return found


def make_class(graded: Path, out: Path, students: int, copies: int, seed: int = 49) -> set[tuple[str, str]]:
    """Write a batch folder of `students` at `out`; returns the planted pairs (a < b)."""
    from shardlab.autograder.platforms.batch import submission_sha256
    rng = random.Random(seed)
    templates = _templates(graded)
    shutil.rmtree(out, ignore_errors=True)
    (out / "results").mkdir(parents=True)
    shutil.copy(graded / "batch.json", out / "batch.json")
    names = [f"s{k:03d}" for k in range(students)]
    sources = rng.sample(range(students), copies) if copies else []
    copiers = rng.sample([k for k in range(students) if k not in sources], copies) if copies else []
    planted = dict(zip(copiers, sources))
    made: dict[int, tuple[dict, dict]] = {}
    for k in sorted(range(students), key=lambda k: k in planted):       # copiers last: their source exists
        record, files = templates[k % len(templates)]
        parts = [p["id"] for q in record.get("questions", []) for p in q["parts"] if p.get("kind") == "manual"]
        if k in planted:
            code, written = made[planted[k]]
            code = _code(code, rng, own=False)
            written = {p: t.replace(" ", " indeed ", 1) for p, t in written.items()}
        else:
            code, written = _code(files, rng), _writeup(rng, parts)
        made[k] = (code, written)
        folder = out / "uploads" / names[k] / "assignments"
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        for file, text in code.items():
            (folder / file).write_text(text)
        result = {**json.loads(json.dumps(record)), "submission": str(folder.parent), "written": written,
                  "submission_sha256": submission_sha256(folder.parent)}
        (out / "results" / f"{names[k]}.json").write_text(json.dumps(result))
    return {tuple(sorted((names[a], names[b]))) for a, b in planted.items()}


def _report(folder: Path) -> tuple[float, float, int]:
    """Wall seconds and CPU seconds (user + system, its worker processes included) of one
    `shardlab report folder`, and its process tree's peak summed PSS (bytes)."""
    import resource
    from shardlab.autograder.platforms.process_memory import PeakSampler
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    proc = subprocess.Popen([str(REPO / ".venv/bin/shardlab"), "report", str(folder)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    sampler = PeakSampler(0.1).start(proc.pid)
    _, err = proc.communicate(timeout=1800)
    sampler.stop()
    if proc.returncode:
        sys.exit(f"shardlab report {folder} failed: {err.decode()[-500:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return time.monotonic() - began, cpu, sampler.peak_bytes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graded", type=Path, required=True, help="a real batch folder (grade --out)")
    ap.add_argument("--students", type=int, default=600)
    ap.add_argument("--copies", type=int, default=6)
    ap.add_argument("--out", type=Path, default=REPO / "shardlab-out" / "bench" / "class")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with open("/proc/loadavg") as f:
        print(f"load before: {f.read().split()[0]}")
    began = time.monotonic()
    planted = make_class(args.graded, args.out, args.students, args.copies)
    make_class(args.graded, args.out.with_name(args.out.name + "-3"), 3, 0)
    print(f"made {args.students} students ({len(planted)} planted copies) in {time.monotonic() - began:.1f} s")
    cold, cold_cpu, peak = _report(args.out)
    found = {(p["a"], p["b"]) for p in json.loads((args.out / "class-report.json").read_text())["similar_pairs"]}
    print(f"cold report: {cold:.1f} s wall, {cold_cpu:.1f} CPU-s, peak {peak / 1e6:.0f} MB (summed PSS)")
    print(f"planted pairs found: {len(planted & found)} of {len(planted)}; other pairs flagged: "
          f"{len(found - planted)} {sorted(found - planted)[:10]}")
    warm, warm_cpu, peak_warm = _report(args.out)
    print(f"warm report: {warm:.1f} s wall, {warm_cpu:.1f} CPU-s, peak {peak_warm / 1e6:.0f} MB")
    subprocess.run(["farm-bench", "-n", str(args.runs), "--warmup", "0", "--timeout", "1800",
                    "--vs", f"{REPO / '.venv/bin/shardlab'} report {args.out.with_name(args.out.name + '-3')}",
                    "--", str(REPO / ".venv/bin/shardlab"), "report", str(args.out)], check=False)
    with open("/proc/loadavg") as f:
        print(f"load after: {f.read().split()[0]}")


if __name__ == "__main__":
    main()
