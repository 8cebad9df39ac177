"""The errors users see, each a clear one-line message, and the exit status
each means (`EXIT_STATUSES`: `shardlab --help` and docs/grading.md list them).

A script tells what went wrong from the status alone:

- 0: done (`shardlab grade`: every submission graded, its score printed);
- 1: a check ran and failed (`shardlab check`, `shardlab stubs --check`);
- 2: a usage or config error: a bad option, path or course config, or a
  machine below the course's walls (`ShardlabError`); nothing was graded;
- 3: an internal error, a fault of shardlab's, never the student's (a bug;
  with `shardlab grade`, a part the grader failed on: the report is printed,
  the part flagged to regrade);
- 4: a submission refused for what it holds (`SubmissionRefused`: no
  assignments/ folder, an unreadable zip, a link or an unsafe member): a
  report of 0 with its one sentence, as on Gradescope, is printed;
- 130: interrupted (Ctrl-C).
"""

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 3
EXIT_REFUSED = 4
EXIT_INTERRUPTED = 130

EXIT_STATUSES = {
    EXIT_OK: "done (grade: every submission graded)",
    EXIT_CHECK_FAILED: "a check failed (check, stubs --check)",
    EXIT_USAGE: "a usage or config error (a bad option, path or course config; walls below the course's)",
    EXIT_INTERNAL: "an internal error of shardlab's (grade: a part the grader failed on; regrade it)",
    EXIT_REFUSED: "grade: a submission refused for what it holds (no assignments/, an unreadable zip, "
                  "a link): a 0 with its sentence",
    EXIT_INTERRUPTED: "interrupted",
}


class ShardlabError(Exception):
    """Bad input from a user (option, path, config). The CLI prints
    `error: <message>` and exits with `exit_status`; never a traceback."""

    exit_status = EXIT_USAGE


class CheckFailed(ShardlabError):
    """A check that ran and found a failure (the self-check, stale stubs)."""

    exit_status = EXIT_CHECK_FAILED


class SubmissionRefused(ShardlabError):
    """An upload refused for what it holds (a link, a device, a path outside,
    too big; `NotASubmission`: no single assignments/ folder, an unreadable
    zip). Its message is the one sentence the student reads: `grading.grade_path`
    scores the upload 0 with it (exit status EXIT_REFUSED), as Gradescope does."""

    exit_status = EXIT_REFUSED
