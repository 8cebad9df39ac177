"""Jinja templates of the handout, the solutions and the starter kit's README.

A package only so that `importlib.resources` finds them (autograder/core/content.py).
"""
