"""What `shardlab build` writes: the handout and solutions (render.py,
formats.py, figures.py, jinja.py), the stubs (stubs.py), the starter kit
(starter.py, which ships kit/comparison.py as the kit's checks),
per-student handouts (roster.py) and the otter autograder zip
(otter_export.py)."""
