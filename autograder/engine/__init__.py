"""What a grade is: parts and cases (parts.py), comparison rules
(comparison.py, rank_comparison.py), test-case generation (casegen.py),
every part's cases and expected values (plan.py), how calls are evaluated
(probes.py), scoring (grading.py) and its results (results.py), reading an
upload (submission.py), the student-answers sheet (answer_sheet.py),
per-student configs (variants.py) and the instructor's self-check
(selfcheck.py)."""
