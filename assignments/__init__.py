"""Your solutions: fill in each module."""
