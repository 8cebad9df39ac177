"""What `shardlab build` writes: the handout and solutions (render, formats,
figures, diagrams, jinja, mathtext), the stubs (stubs), the starter kit
(starter, which ships the kit package whole: kit_harness), per-student
handouts (roster) and the otter autograder zip (otter_export), with its
Gradescope image replayed for the tests and the benchmark
(gradescope_replay). Nothing here runs while a submission is graded."""
