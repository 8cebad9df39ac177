"""shardlab's grading engine, installed as `shardlab.autograder`.

Folders by concern (ARCHITECTURE.md walks through each):

- `engine/`     what a grade is: parts and cases, comparison rules, the plan
                of one grading, scoring, reports, the student-answers sheet
- `questions/`  one definition per question (its parts, cases, feedback)
- `sandbox/`    running student code: the jail, staging, single-process
                sandboxes and the gloo harness (`sandbox/gloo/`: the grader
                side; `sandbox/gloo/ranks/`: what runs inside each rank)
- `publish/`    what `shardlab build` writes: handouts, stubs, starter kit,
                per-student variants, the otter autograder zip
- `platforms/`  where grading runs besides a terminal: otter/Gradescope, batch
- `bench/`      the bucket-size experiment behind `shardlab bench buckets`
- `cli.py`      the front door: parses arguments and calls one of the above
"""
