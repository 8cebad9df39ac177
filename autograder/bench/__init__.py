"""Experiments shipped with the course (not graded): `shardlab bench ...`."""
