"""Running student code: the jail that walls a process in (jail.py), copying
an upload without following links (staging.py), one sandboxed process and
its limits (process.py, worker.py runs inside it), the walls this machine
can build (walls.py), and treating what comes back as untrusted text
(untrusted.py). The gloo harness for distributed parts is in gloo/."""
