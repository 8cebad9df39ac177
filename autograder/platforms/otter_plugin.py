"""shardlab's otter plugin (named in the zip's otter_config.json), apart from
`platforms.otter` because it subclasses otter's plugin class, and importing
otter costs about a second (pandas, nbconvert): run_autograder's own steps
(the grading started before otter, the finalize step after it) run
`platforms.otter` without paying for it. otter imports this module itself,
in its own process, where it has imported otter anyway.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from otter.plugins import AbstractOtterPlugin

from shardlab.autograder.platforms.otter import OTTER_OWN, QUARANTINE, REPORT_FILE, clean_case_messages, grading_notes


def quarantine_upload(submission_dir: Path) -> None:
    """Move everything but otter's own files out of `submission_dir`, into the quarantine beside it."""
    target = submission_dir.parent / QUARANTINE
    target.mkdir(exist_ok=True)
    for entry in submission_dir.iterdir():
        if entry.name not in OTTER_OWN:
            shutil.move(str(entry), str(target / entry.name))


class QuarantinePlugin(AbstractOtterPlugin):
    """otter plugin (listed in the zip's otter_config.json): before the kernel
    starts, move the student's files out of its working folder; after grading,
    make each failed case's message shardlab's alone and add the report's
    notes (walls, internal errors) to the results."""

    def before_grading(self, config):
        quarantine_upload(Path(self.submission_path).resolve().parent)

    def after_grading(self, results):
        path = Path(self.submission_path).resolve().parent.parent / REPORT_FILE
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            notes = grading_notes(report)
        except (OSError, ValueError):
            report, notes = None, "shardlab: no grading report was written (see the test cases)."
        clean_case_messages(results, report)
        results.set_output(notes)
