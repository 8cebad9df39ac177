"""PyTorch's own FSDP2 (`fully_shard`) trained on a toy model: what a correct
student FSDP must agree with (SPEC.md question 2).

The grader needs these weights as expected values, and they come from a
multi-rank run, so `fully_shard_state` launches its own trusted gloo group
(this module, run as `python -m reference.fsdp2_agreement`), never a group
that has imported student code. Results are cached in memory and on disk
(keyed by the arguments and the torch version): they are deterministic.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "shardlab"
TIMEOUT_SECONDS = 180


def _train(rank: int, args: dict) -> dict | None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.distributed.fsdp import fully_shard

    from reference.toy_models import batch, build_model, make_optimizer, shard, train

    world = args["world_size"]
    dist.init_process_group("gloo", store=dist.FileStore(args["store"], world), rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    model = build_model(args["model"], args["seed"])
    for m in model.modules():                       # one FSDP unit per nn.Linear, as in SPEC.md
        if isinstance(m, nn.Linear) and any(p.requires_grad for p in m.parameters(recurse=False)):
            fully_shard(m)
    fully_shard(model)
    inputs, targets = batch(args["model"], args["seed"], world)
    opt = make_optimizer(args["optimizer"], model.parameters())
    train(model, opt, shard(inputs, rank), shard(targets, rank), args["steps"])
    state = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().tolist()
             for k, v in model.state_dict().items()}
    dist.destroy_process_group()
    return state if rank == 0 else None


@lru_cache(maxsize=None)
def fully_shard_state(model: str, optimizer: str, steps: int, seed: int, world_size: int) -> dict:
    """Final weights (state_dict names -> nested lists) of fully_shard training."""
    import torch
    args = dict(model=model, optimizer=optimizer, steps=steps, seed=seed, world_size=world_size)
    key = hashlib.sha256(json.dumps([args, torch.__version__], sort_keys=True).encode()).hexdigest()[:24]
    cached = CACHE / f"fsdp2-{key}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    with tempfile.TemporaryDirectory(prefix="shardlab-fsdp2-") as tmp:
        request = json.dumps(dict(args, store=os.path.join(tmp, "store")))
        procs = [subprocess.Popen([sys.executable, "-m", "reference.fsdp2_agreement", str(r), request],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  start_new_session=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
                 for r in range(world_size)]
        try:
            outs = [p.communicate(timeout=TIMEOUT_SECONDS) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, 9)
                    p.wait()
        if any(p.returncode for p in procs):
            err = next(o[1] for p, o in zip(procs, outs) if p.returncode)
            raise RuntimeError(f"the fully_shard reference run failed: {err.strip().splitlines()[-1:]}")
    state = json.loads(outs[0][0])
    try:
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp_file = cached.with_suffix(f".tmp{os.getpid()}")
        tmp_file.write_text(json.dumps(state))
        os.replace(tmp_file, cached)
    except OSError:
        pass                                            # a read-only home only costs a re-run
    return state


if __name__ == "__main__":
    import warnings
    warnings.simplefilter("ignore")
    result = _train(int(sys.argv[1]), json.loads(sys.argv[2]))
    if result is not None:
        print(json.dumps(result))
