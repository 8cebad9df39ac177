"""Where grading runs besides one terminal: otter/Gradescope (otter, the code
the autograder zip's tests call), a class's batch (batch), a Gradescope
export re-graded (gradescope_export), and the memory a grading's processes
use (process_memory)."""
