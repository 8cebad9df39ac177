"""Text a student can influence, on its way into feedback.

A submission controls more of its feedback than it seems: exception
messages, returned values, rank errors, file names, and, since student code
can write to its worker's result channel, anything a worker reports. That
text reaches a terminal (the CLI prints with rich), Markdown files (batch:
feedback/<name>.md) and Gradescope, which shows otter's failure messages as
HTML. Unfiltered, it could rewrite the terminal, inject links and scripts,
drown the feedback, or (in a hidden case) carry the hidden inputs out.

So untrusted text is handled twice, in one place each:

- where it enters a report: `one_line` (or `block` for multi-line text)
  drops control characters, terminal escape sequences and invisible
  formatting characters, and caps the size, saying so with an ellipsis;
  for a hidden case `failure_kind` and `problem_kind` say only what kind of
  failure happened, in the grader's words;
- where it is shown: `markdown`, `html` and `rich` escape it for the format
  (and cap it again, since a report may come from a results file).
"""
from __future__ import annotations

import html as _html
import re
import unicodedata

from shardlab.autograder.kit.student_values import shortened

LINE_CAP = 500          # one failure line of feedback
FEEDBACK_CAP = 2000     # a part's whole feedback, as shown

# CSI (colours, cursor moves), OSC (window titles, hyperlinks) and the other
# two-character escapes of ECMA-48.
_TERMINAL_ESCAPE = re.compile(  # CSI sequences, OSC strings, two-byte escapes, 8-bit CSI
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])|\x9b[0-?]*[ -/]*[@-~]")
# control (Cc), format (Cf: zero-width and bidi overrides), surrogate (Cs:
# undecodable bytes), private use (Co), line and paragraph separators
_INVISIBLE = {"Cc", "Cf", "Cs", "Co", "Zl", "Zp"}
_BREAKS = {"\n", "\r", "\t", "\v", "\f", "\x85", "\u2028", "\u2029"}


def _visible(text: str, keep_newlines: bool, budget: int) -> str:
    text = str(text)[: budget * 4 + 64]          # bound the work; the cap comes later
    text = _TERMINAL_ESCAPE.sub("", text.replace("\r\n", "\n"))
    out = []
    for c in text:
        if c in _BREAKS:
            out.append("\n" if keep_newlines and c in "\n\r" else " ")
        elif unicodedata.category(c) not in _INVISIBLE:
            out.append(c)
    return "".join(out)


def cap(text: str, limit: int) -> str:
    """At most `limit` characters; a cut text is cut at a word boundary and ends with an ellipsis
    (`kit.student_values.shortened`, the kit's rule too)."""
    return shortened(text, limit)


def one_line(text: str, limit: int = LINE_CAP) -> str:
    """Untrusted text as one printable line of at most `limit` characters."""
    return cap(" ".join(_visible(text, False, limit).split()), limit)


def block(text: str, limit: int) -> str:
    """Untrusted multi-line text (printed output): printable lines only."""
    lines = [line.rstrip() for line in _visible(text, True, limit).split("\n")]
    return cap("\n".join(lines), limit)


# ---- escaping where feedback is shown ---------------------------------------

# Feedback is one line inside a list item, so only inline markup can start
# mid-line: emphasis, code, links and images, strikethrough, table cells,
# math. Those characters get a backslash; the three HTML-special ones become
# entities, so that HTML renderers see text too.
_MARKDOWN = {ord(c): "\\" + c for c in "\\`*_[]|~$"}
_MARKDOWN.update({ord("&"): "&amp;", ord("<"): "&lt;", ord(">"): "&gt;"})


def markdown(text: str, limit: int = FEEDBACK_CAP) -> str:
    """One line of untrusted text for a Markdown document: no emphasis,
    link, heading, list, table or HTML survives as markup."""
    return one_line(text, limit).translate(_MARKDOWN)


def html(text: str, limit: int = FEEDBACK_CAP) -> str:
    """One line of untrusted text for an HTML page (Gradescope's test output)."""
    return _html.escape(one_line(text, limit), quote=False)


def rich(text: str, limit: int = FEEDBACK_CAP) -> str:
    """One line of untrusted text inside rich console markup."""
    from rich.markup import escape
    return escape(one_line(text, limit))


# ---- hidden cases: the kind of failure, never anything the student chose ----
#
# A hidden case's feedback is a channel out of the grader: whatever in it the
# student's code can choose, a submission can set from the hidden inputs and
# read back in its feedback (the class of an exception it raises, the type it
# returns, the rank that fails, how long it takes). So a hidden case says one
# of a few fixed kinds below, chosen only by what happened, and nothing else
# of the student's: its group's name and, where the value returned matches a
# known mistake, that mistake (`engine.grading`). docs/trust.md bounds what
# the kinds and the misconceptions can still carry.

DID_NOT_FINISH = "did not finish in time"
NOT_RUN = "not run: an earlier call in its case group did not finish"
CRASHED = "crashed (its process ended, or broke the grader's channel)"
RAISED = "raised an exception"
FAILED_TO_IMPORT = "failed to import"
WRONG_VALUE = "wrong value"
WRONG_TYPE = "wrong type"
FAILURE_KINDS = (DID_NOT_FINISH, NOT_RUN, CRASHED, RAISED, FAILED_TO_IMPORT)
PROBLEM_KINDS = (WRONG_VALUE, WRONG_TYPE)

_RANK = re.compile(r"rank (\d{1,2})(?: hung)?: ")
_IMPORT = " failed to import: "
# the comparisons' reasons (`kit.comparison.judge`) that say the returned value had the wrong type
_WRONG_TYPE = re.compile(r"returned \S+, expected (?:an int|a number|a dict)|\[.*\] is \S+, expected an int"
                         r"|returned None|returned a value that is not plain data", re.DOTALL)


def failure_kind(error: str) -> str:
    """What a hidden case may say about a failed call: one of FAILURE_KINDS,
    chosen from the error's shape, with no word of the error itself (not the
    exception's class, not the rank)."""
    text = one_line(error, 10_000)
    if text.startswith("not run: "):
        return NOT_RUN
    if "did not finish" in text or "timed out" in text or _RANK.match(text) and " hung: " in text[:15]:
        return DID_NOT_FINISH
    if "ended the grading process" in text or "ended its process" in text \
            or "corrupted the grader's result channel" in text:
        return CRASHED
    if _IMPORT in text:
        return FAILED_TO_IMPORT
    if text.startswith("TypeError: returned a ") and "not a plain number" in text:
        return WRONG_TYPE
    return RAISED


def problem_kind(problem: str) -> str:
    """What a hidden case may say about a wrong value: one of PROBLEM_KINDS,
    a wrong type (the type the student returned is theirs to choose: not
    named) or a wrong value."""
    return WRONG_TYPE if _WRONG_TYPE.fullmatch(problem) else WRONG_VALUE
