"""The starter kit's public runs, checked on local gloo ranks: the same
scenario, comparator and wording as the grader's feedback on that public
case (`engine.grading`), on the student's own machine.

`kit_harness.public_runs` writes the runs (tests/public_runs.json in
the kit); the kit's tests call `check_run(run, ranks)` with one `Ranks` for
the whole pytest session. Parts that judge the same run (2.7-2.11 judge the
same trainings) share it: each distinct run happens once. After a run hangs
or a rank dies, the scenario's remaining runs are not started, as in the
grader (`gloo.launch`): each would only cost the deadline again.

The kit's tests/conftest.py words its short report with `failure_line` (one
line per failed public test, calls' checks and runs alike) and marks each
test with its task's `task_marker` (`pytest -m task_2_1`) and with
`bound_seconds`, pytest-timeout's bound on it: a backstop above the kit's
own deadlines (a call's, `comparison.check`; a run's, SCENARIO_SECONDS), so
that no public test can hang pytest; a test it stops fails with
`timed_out`, in the grader's words.
"""
from __future__ import annotations

import json
import re

from .checks import comparator_named
from .comparison import call_text, did_not_finish, public_feedback, show_value
from .local import START_SECONDS, LocalGroup, ScenarioFailed
from .student_values import describe_exception, shortened

SCENARIO_SECONDS = 30.0         # one training run takes well under a second; a laptop may be slow
COLLECTIVE_SECONDS = 5.0
FEEDBACK_CHARS = 400            # one line of the kit's short pytest report; `pytest -v` shows a message whole
# pytest-timeout's bounds (`bound_seconds`): a check may import the student's module first (torch: seconds,
# more on a cold laptop; the grader allows an import 60 s) before its call's own limit; a run may start its
# ranks (START_SECONDS) before its scenario's deadline
CHECK_BOUND_SECONDS = 120.0
RUN_BOUND_SECONDS = START_SECONDS + SCENARIO_SECONDS + 60.0


def run_key(scenario: str, module: str, args: dict) -> str:
    """What makes two runs the same run."""
    return json.dumps([scenario, module, args], sort_keys=True)


class Ranks:
    """Local gloo groups by world size, started on first use and replaced after
    a failure, and the result of every distinct run."""

    def __init__(self, root: str = "."):
        self.root = root
        self._groups: dict[int, LocalGroup] = {}
        self._results: dict[str, list | ScenarioFailed] = {}      # run key -> per-rank values or ScenarioFailed
        self._given_up: dict[str, str] = {}         # scenario -> "hung" / "ended a rank"
        self.events: dict[str, list[list[dict]]] = {}   # run key -> each rank's timed trace

    def run(self, scenario: str, module: str, args: dict) -> list:
        """Each rank's value of the scenario, or ScenarioFailed; its trace is then in
        `events[run_key(scenario, module, args)]`."""
        key = run_key(scenario, module, args)
        if key not in self._results:
            self._results[key] = self._start(key, scenario, module, args)
        result = self._results[key]
        if isinstance(result, ScenarioFailed):
            raise result
        return result

    def _start(self, key: str, scenario: str, module: str, args: dict):
        if scenario in self._given_up:
            return ScenarioFailed(f"not run: an earlier {scenario} run {self._given_up[scenario]}", "skipped")
        size = int(args["world_size"])
        try:
            group = self._groups.get(size)
            if group is None:
                group = self._groups[size] = LocalGroup(size, self.root, COLLECTIVE_SECONDS)
            run_args = {k: v for k, v in args.items() if k != "world_size"}
            values = group.run(scenario, module, run_args, SCENARIO_SECONDS)
            self.events[key] = group.events
            return values
        except ScenarioFailed as exc:
            if exc.state != "clean-error":
                self._groups.pop(size, None)
            if exc.state in ("hung", "died"):
                self._given_up[scenario] = "hung" if exc.state == "hung" else "ended a rank"
            return exc

    def start(self, sizes) -> None:
        """Start the groups of these world sizes now without waiting for them: their ranks import
        torch while the session runs other tests, and a size's first run waits for its group. A group
        that cannot be spawned is left to that first run, which then fails as it would have."""
        for size in sizes:
            if size not in self._groups:
                try:
                    self._groups[size] = LocalGroup(size, self.root, COLLECTIVE_SECONDS, wait=False)
                except Exception:  # noqa: BLE001 - the run that needs the group reports it
                    pass

    def close(self) -> None:
        for group in self._groups.values():
            group.close()
        self._groups.clear()


def check_run(run: dict, ranks: Ranks) -> list:
    """Run one public case (an entry of public_runs.json) and judge it like the
    grader: AssertionError with the grader's line of feedback unless it passes.
    Returns each rank's value."""
    try:
        got = ranks.run(run["scenario"], run["module"], run["args"])
    except ScenarioFailed as exc:
        raise AssertionError(f"{run['call']}: {exc}") from None
    compare = comparator_named(run["compare"])
    problem = compare.problem(run["expected"], got)
    if problem is None:
        return got
    mistake = next((message for value, message in run["mistakes"] if compare(value, got)), None)
    raise AssertionError(f"{run['call']}: "
                         + public_feedback(problem, run["expected"], show_value(got)[:200], run["note"], mistake))


def task_marker(task: str) -> str:
    """The pytest marker of a task's public tests in the kit: `pytest -m task_2_1` selects
    task 2.1 alone (`-k 2.1` matches substrings, 2.10 and 2.11 too)."""
    return "task_" + re.sub(r"\W", "_", task)


def call_of(entry: dict) -> str:
    """How feedback names the call of a public test: an entry of public_runs.json (its
    `call`) or of public_cases.json (its check's function and arguments)."""
    if "call" in entry:
        return entry["call"]
    return call_text(entry["check"]["function"], entry["check"]["args"])


def bound_seconds(entry: dict) -> float:
    """pytest-timeout's bound on the public test of `entry` (of public_runs.json or
    public_cases.json). Only a backstop: the kit's own deadlines stop a hang first
    (a call's limit, `comparison.check`, where an alarm is available; a run's,
    SCENARIO_SECONDS)."""
    return RUN_BOUND_SECONDS if "call" in entry else CHECK_BOUND_SECONDS


def timed_out(entry: dict, seconds: float) -> AssertionError:
    """What a public test stopped by pytest-timeout after `seconds` failed with, for
    `failure_line`: its call and the grader's words for a call past its limit."""
    return AssertionError(f"{call_of(entry)}: {did_not_finish(seconds)}")


def failure_line(entry: dict, exc: BaseException) -> str:
    """A failed public test in one line: the grader's feedback when the check itself
    failed (`check` or `check_run` raised, naming the call first), else the call and
    what the student's code raised, at its innermost line in assignments/. Capped at
    FEEDBACK_CHARS, cut at a word boundary."""
    call, text = call_of(entry), str(exc)
    if not (isinstance(exc, AssertionError) and text.startswith(f"{call}: ")):
        text = f"{call}: {describe_exception(exc)}"
    text = " ".join(text.split())
    return shortened(text, FEEDBACK_CHARS)
