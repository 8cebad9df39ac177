"""The code the starter kit carries: the grader's own, shipped whole.

`shardlab build` copies this package file for file into the kit as
tests/shardlab_local/. The grader imports it as shardlab.autograder.kit; it
imports only itself (relatively), the standard library, torch, numpy and
matplotlib, so it is the same code under either name. Do not edit the kit's
copy: the autograder uses its own.

- comparison, rank_comparison: when a returned value, or a run's per-rank
  results, are right, and the words for when they are not;
- checks/: what each distributed question checks of a run;
- scenarios/: the runs themselves, one module per distributed question (a
  rank's trusted half and the student's half);
- tracing: torch.distributed traced, for the checks and the timelines;
- toy_models, comm4d_mesh: the small models, data and optimizers the runs
  train, and the 2 x 2 mesh the 4D question's run traces;
- local, local_checks: the kit's launcher (one subprocess per rank, no
  walls; the grader launches the same scenarios in its jails) and a public
  run judged as the grader judges it;
- verdict, student_values: the words for a hang or a crash, and a student's
  results as plain data;
- timelines/: one traced step drawn against what it should look like;
- bucket_experiment, bucket_timing: question 4 (c)'s experiment, host and
  rank side (tests/bench_buckets.py in the kit, `shardlab bench buckets` for
  the course staff); its scenarios are loaded only by its own ranks.
"""
