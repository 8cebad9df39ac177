"""Every module of the package imports on its own, in a fresh process."""
import subprocess
import sys
import textwrap

import pytest

from helpers import package_modules

pytestmark = pytest.mark.sandbox       # one import of torch, then each module in a fork


def test_every_module_imports_on_its_own():
    """Each module in a fresh process (forked from an interpreter that has
    imported nothing of shardlab), so no module works only because another
    was imported first. The interpreter has imported torch itself (what every
    `import torch` does first): each child then pays for its own modules, not
    for torch again, and a module that uses torch without importing it still
    fails (a name is never bound by another module's import)."""
    script = textwrap.dedent("""
        import importlib, os, sys, traceback
        import torch  # noqa: F401
        failed = []
        for name in sys.argv[1:]:
            pid = os.fork()
            if pid == 0:
                try:
                    importlib.import_module(name)
                except BaseException:
                    traceback.print_exc()
                    os._exit(1)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            if status:
                failed.append(name)
        print("FAILED", *failed)
    """)
    done = subprocess.run([sys.executable, "-c", script, *package_modules()], capture_output=True, text=True,
                          timeout=600, cwd="/")
    assert done.stdout.strip() == "FAILED", done.stdout + done.stderr[-3000:]
