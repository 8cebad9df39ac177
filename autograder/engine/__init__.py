"""One grading: every part's cases and expected values (plan), how calls are
evaluated (probes), scoring and feedback (grading), reading an upload
(submission), the student-answers sheet (answer_sheet), the written answers
(writeup) and per-student configs (variants)."""
