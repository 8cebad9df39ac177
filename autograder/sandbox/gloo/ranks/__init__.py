"""The gloo harness, rank side: the process entry points (main.py), the
trusted half of a rank that owns the gloo connection and records every
collective (trusted.py, tracing.py), the student half's stand-in for
torch.distributed (proxy.py), the framed channel between them (channel.py)
and the per-question scenarios (scenarios/)."""
