"""Find the `assignments/` folder of a submission: a folder or a zip."""
from __future__ import annotations

import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from autograder.errors import ShardlabError

MAX_UNPACKED_BYTES = 50 * 2**20


def _root_of(folder: Path, shown: str) -> Path:
    """The folder holding assignments/: the folder itself, or its single subfolder."""
    if (folder / "assignments").is_dir():
        return folder
    subdirs = [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))]
    if len(subdirs) == 1 and (subdirs[0] / "assignments").is_dir():
        return subdirs[0]
    if folder.name == "assignments":
        return folder.parent
    raise ShardlabError(f"not a submission: {shown} holds no assignments/ folder")


@contextmanager
def open_submission(path: str | Path) -> Iterator[Path]:
    """Yield the root folder (which holds assignments/) of a folder or zip submission."""
    path = Path(path)
    if not path.exists():
        raise ShardlabError(f"no such file or folder: {path}")
    if path.is_dir():
        yield _root_of(path, str(path))
        return
    if not zipfile.is_zipfile(path):
        raise ShardlabError(f"not a submission: {path} is neither a folder nor a zip file")
    with tempfile.TemporaryDirectory(prefix="shardlab-sub-") as tmp:
        with zipfile.ZipFile(path) as zf:
            members = zf.infolist()
            if sum(m.file_size for m in members) > MAX_UNPACKED_BYTES:
                raise ShardlabError(f"submission {path} unpacks to more than "
                                    f"{MAX_UNPACKED_BYTES // 2**20} MiB")
            for m in members:
                target = (Path(tmp) / m.filename).resolve()
                if not target.is_relative_to(Path(tmp).resolve()):
                    raise ShardlabError(f"submission {path} has an unsafe path: {m.filename}")
            zf.extractall(tmp)
        yield _root_of(Path(tmp), str(path))
