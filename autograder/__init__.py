"""shardlab's grading engine, installed as `shardlab.autograder`.

Folders by concern, bottom up; each imports only from the folders below it
(`test_package_structure` checks it; ARCHITECTURE.md walks through each):

- `kit/`        the code the starter kit carries, shipped whole: comparison
                rules, the distributed checks, scenarios, tracing, timelines
- `core/`       the shared vocabulary: parts, results, phases, errors
- `sandbox/`    running student code: the jail, staging, sandboxed processes
                and the gloo harness (`sandbox/gloo/`)
- `questions/`  one folder per question: its definition and its figures
- `engine/`     one grading: plan, probes, scoring, answer sheets, variants
- `platforms/`  where grading runs besides a terminal: otter/Gradescope, batch
- `publish/`    what `shardlab build` writes: handouts, stubs, starter kit,
                per-student handouts, the otter autograder zip
- `cli`, `selfcheck`  the front door, and `shardlab check`

The ground truth is `shardlab.reference` (the `reference/` folder), between
`core` and `sandbox`.
"""
