"""A long temporary folder (TMPDIR) breaks nothing: the grader's Unix
sockets (a gloo group's, a batch's zygote's) are made in it, and a socket's
path holds 107 bytes (`sandbox.unix_socket`)."""
import socket
import tempfile

import pytest

from helpers import module_submission
from shardlab.autograder.core.parts import Call
from shardlab.autograder.sandbox import unix_socket

SUMMER = '''
import torch
import torch.distributed as dist

def summed(k):
    t = torch.tensor([float(dist.get_rank() + k)])
    dist.all_reduce(t)
    return t.item()
'''


def _long_folder(base) -> str:
    folder = base / ("a-temporary-folder-with-a-long-name-" * 3)
    folder.mkdir()
    return str(folder)


@pytest.mark.pure
def test_a_socket_path_over_107_bytes_binds_and_connects(tmp_path):
    path = f"{_long_folder(tmp_path)}/ctl.sock"
    assert len(path.encode()) > unix_socket.MAX_PATH_BYTES
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        unix_socket.bind(server, path)
        server.listen(1)
        unix_socket.connect(client, path)
        conn, _ = server.accept()
        with conn:
            client.sendall(b"hello")
            assert conn.recv(5) == b"hello"
    assert (tmp_path / path).exists()          # made where the path says


@pytest.mark.sandbox
def test_gloo_runs_under_a_long_temporary_folder(tmp_path, monkeypatch):
    """Each gloo group's socket is made in the grader's temporary folder: under a long TMPDIR
    its path passes the limit, and the group must still start and run."""
    from shardlab.autograder.sandbox.gloo.launch import run_gloo
    (tmp_path / "sub").mkdir()
    root = module_submission(tmp_path / "sub", "summer", SUMMER)
    monkeypatch.setattr(tempfile, "tempdir", _long_folder(tmp_path))
    calls = [Call("summer", "run_function", {"world_size": 2, "function": "summed", "args": [k]}) for k in (1, 10)]
    outcomes = run_gloo(str(root), calls).outcomes
    assert [o.error for o in outcomes] == [None, None]
    # each rank's value: (0 + k) + (1 + k)
    assert [[rank["value"] for rank in o.value] for o in outcomes] == [[3.0, 3.0], [21.0, 21.0]]
