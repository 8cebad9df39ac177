"""Where grading runs besides one terminal: otter/Gradescope (otter.py, the
code the autograder zip's tests call) and a class's batch (batch.py)."""
