"""What a grade is: parts and cases (parts.py), comparison rules
(comparison.py, rank_comparison.py), test-case generation (casegen.py), the
plan of one grading and its scoring (grading.py), reading an upload
(submission.py), the student-answers sheet (answer_sheet.py) and the
instructor's self-check (selfcheck.py)."""
