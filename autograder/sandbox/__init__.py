"""Running student code: the jail that walls a process in (jail), copying an
upload without following links (staging), one torch import forked for every
worker (zygote), one sandboxed process and its limits (process; worker runs
inside it), the walls this machine can build (walls), and treating what
comes back as untrusted text (untrusted). The gloo harness for distributed
parts is in gloo/; the scenarios it runs are the kit's."""
