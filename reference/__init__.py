"""Ground truth for shardlab: hardware and model specs, the course config, and
the analytic models with worked derivations. Every number a student or an
instructor sees is computed here from the course config."""
