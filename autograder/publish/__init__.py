"""What `shardlab build` writes: the handout and solutions (render.py,
formats.py, figures.py), the stubs (stubs.py), the starter kit (starter.py,
public_check.py), per-student variants (variants.py) and the otter
autograder zip (otter_export.py)."""
