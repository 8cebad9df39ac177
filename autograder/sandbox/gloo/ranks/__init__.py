"""The gloo harness, rank side: the process entry points (main), the trusted
half of a rank that owns the gloo connection and records every collective
(trusted), the student half's stand-in for torch.distributed (proxy), the
framed channel between them (channel) and point-to-point ops (p2p). The
scenarios the ranks run, and the tracer, are the kit's (`kit.scenarios`,
`kit.tracing`): the starter kit runs the same ones."""
