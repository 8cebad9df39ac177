"""Tiny models and data for the real distributed runs (DDP, FSDP, the pipeline).

Each model is small enough to train in milliseconds on CPU yet exercises a
corner of gradient synchronization: a frozen parameter, a bias-free layer, a
buffer that must be broadcast, tied (shared) weights. Everything is FP32.

The same code builds the model in the grader (single-process expectation)
and in every gloo rank, so the two runs differ only in what the student
wrote. Rank r starts from `seed + r` (different weights per rank, so the
broadcast of rank 0's state is tested) and trains on rows
[r*b, (r+1)*b) of the global batch.

Question 5's pipeline splits `FFNStack`, the course's FFN-only model in
miniature (L residual blocks x + W_out tanh(W_in x), no biases), into p
stages of L/p consecutive blocks (`ffn_stage`); its mini-batch is m
micro-batches of PIPE_ROWS rows (`pipeline_batch`), all of it on stage 0
(inputs) and the last stage (targets).
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

ROWS_PER_RANK = 4


class FrozenMLP(nn.Module):
    """in 6 -> 10 -> 10 (frozen, bias-free) -> 4 (bias-free) -> 3, tanh between;
    a buffer `shift` is added to the input (it must be broadcast too)."""

    in_dim, out_dim = 6, 3

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 10)                     # weight 240 B, bias 40 B
        self.fc2 = nn.Linear(10, 10, bias=False)        # 400 B, frozen
        self.fc3 = nn.Linear(10, 4, bias=False)         # 160 B, bias-free
        self.head = nn.Linear(4, 3)                     # 48 B + 12 B
        self.fc2.weight.requires_grad_(False)
        self.register_buffer("shift", torch.randn(6))

    def forward(self, x):
        h = torch.tanh(self.fc1(x + self.shift))
        h = torch.tanh(self.fc2(h))
        return self.head(torch.tanh(self.fc3(h)))


class TiedAutoencoder(nn.Module):
    """enc 8 -> 8 (bias-free), mid 8 -> 8, dec 8 -> 8 sharing enc's weight:
    the tied weight appears once in parameters() and gets gradient from both
    uses; it is ready only when the backward pass reaches the encoder."""

    in_dim, out_dim = 8, 8

    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 8, bias=False)          # 256 B, tied with dec
        self.mid = nn.Linear(8, 8)                      # 256 B + 32 B
        self.dec = nn.Linear(8, 8)                      # weight = enc.weight; bias 32 B
        self.dec.weight = self.enc.weight

    def forward(self, x):
        return self.dec(torch.tanh(self.mid(torch.tanh(self.enc(x)))))


MODELS: dict[str, type[FrozenMLP] | type[TiedAutoencoder]] = {"frozen_mlp": FrozenMLP, "tied": TiedAutoencoder}

PIPE_D_MODEL, PIPE_D_FF, PIPE_BLOCKS, PIPE_ROWS = 8, 16, 4, 3     # PIPE_ROWS: rows per micro-batch


class FFNBlock(nn.Module):
    """x + W_out tanh(W_in x): the course's FFN block, bias-free, with its residual
    (without it the signal fades through the blocks and the first stage barely trains)."""

    def __init__(self, d_model: int = PIPE_D_MODEL, d_ff: int = PIPE_D_FF):
        super().__init__()
        self.w_in = nn.Linear(d_model, d_ff, bias=False)
        self.w_out = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x):
        return x + self.w_out(torch.tanh(self.w_in(x)))


class FFNStack(nn.Module):
    """PIPE_BLOCKS FFN blocks in a row; state names "blocks.<i>.w_in.weight", ..."""

    def __init__(self, num_blocks: int = PIPE_BLOCKS):
        super().__init__()
        self.blocks = nn.ModuleList(FFNBlock() for _ in range(num_blocks))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


# torch's default CPU generator is one per process, and the grader's process runs gradings on threads
# (`shardlab check --jobs`, batches): a model built while another thread seeds or draws from it gets
# other weights, and an expected value computed from those is wrong, and cached (`reference.cache`).
# Every seeded use of it in the grader goes through `seeded_cpu_rng`, one thread at a time.
GLOBAL_RNG_LOCK = threading.RLock()


@contextmanager
def seeded_cpu_rng(seed: int) -> Iterator[None]:
    """Within: torch's global CPU generator seeded with `seed`, this thread's alone (GLOBAL_RNG_LOCK);
    after: its state as it was. torch.manual_seed would also queue the seed for CUDA, XPU and MTIA when
    none is initialized, and each queueing formats the caller's stack (reading source files): about
    1.5 ms a call, in every rank of every run, so only the CPU generator is seeded."""
    with GLOBAL_RNG_LOCK, torch.random.fork_rng(devices=[]):
        torch.random.default_generator.manual_seed(seed)
        yield


def build_ffn(seed: int) -> FFNStack:
    """The pipeline's whole model with weights drawn from `seed` (the global RNG is left as it was)."""
    with seeded_cpu_rng(seed):
        return FFNStack()


def stage_blocks(stage: int, num_stages: int, num_blocks: int = PIPE_BLOCKS) -> range:
    """The blocks stage `stage` of `num_stages` holds (num_blocks divisible by num_stages)."""
    if num_blocks % num_stages or not 0 <= stage < num_stages:
        raise ValueError(f"{num_blocks} blocks do not split into stage {stage} of {num_stages}")
    per = num_blocks // num_stages
    return range(stage * per, (stage + 1) * per)


def ffn_stage(model: FFNStack, stage: int, num_stages: int) -> nn.Sequential:
    """Stage `stage`'s blocks of `model` (shared, not copied), as nn.Sequential ("0.w_in.weight", ...)."""
    return nn.Sequential(*(model.blocks[i] for i in stage_blocks(stage, num_stages)))


def stage_state_names(stage: int, num_stages: int) -> dict[str, str]:
    """A stage's state names -> the whole model's ("1.w_out.weight" -> "blocks.3.w_out.weight")."""
    names = {}
    for j, i in enumerate(stage_blocks(stage, num_stages)):
        for w in ("w_in", "w_out"):
            names[f"{j}.{w}.weight"] = f"blocks.{i}.{w}.weight"
    return names


def pipeline_batch(seed: int, microbatches: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One mini-batch: inputs and targets (m * PIPE_ROWS, PIPE_D_MODEL), FP32."""
    gen = torch.Generator().manual_seed(20_000 + seed)
    rows = PIPE_ROWS * microbatches
    return torch.randn(rows, PIPE_D_MODEL, generator=gen), torch.randn(rows, PIPE_D_MODEL, generator=gen)


def build_model(name: str, seed: int) -> nn.Module:
    """The model `name` with weights drawn from `seed` (the global RNG is left as it was)."""
    with seeded_cpu_rng(seed):
        return MODELS[name]()


def batch(name: str, seed: int, world_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One global batch per step source: inputs (4W, in) and targets (4W, out), FP32."""
    cls = MODELS[name]
    gen = torch.Generator().manual_seed(10_000 + seed)
    rows = ROWS_PER_RANK * world_size
    return torch.randn(rows, cls.in_dim, generator=gen), torch.randn(rows, cls.out_dim, generator=gen)


def shard(tensor: torch.Tensor, rank: int) -> torch.Tensor:
    return tensor[rank * ROWS_PER_RANK:(rank + 1) * ROWS_PER_RANK]


class SGD:
    """torch.optim.SGD(lr, momentum) written out in tensor ops. torch.optim's
    first use imports the compiler stack (torch._dynamo, sympy: seconds per
    process), which the grader and every rank would pay; tests check that
    these two classes step exactly like torch.optim's."""

    def __init__(self, params, lr: float, momentum: float = 0.0):
        self.params, self.lr, self.momentum = list(params), lr, momentum
        self.buffers: dict[int, torch.Tensor] = {}

    @torch.no_grad()
    def step(self) -> None:
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            d = p.grad
            if self.momentum:
                buf = self.buffers.get(i)
                d = self.buffers[i] = d.clone() if buf is None else buf.mul_(self.momentum).add_(d)
            p.add_(d, alpha=-self.lr)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None


class AdamW(SGD):
    """torch.optim.AdamW(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay), single-tensor form."""

    def __init__(self, params, lr: float, weight_decay: float = 0.01, betas=(0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, lr)
        self.weight_decay, self.betas, self.eps = weight_decay, betas, eps
        self.state: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.t = 0

    @torch.no_grad()
    def step(self) -> None:
        self.t += 1
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            g = p.grad
            m, v = self.state.setdefault(i, (torch.zeros_like(p), torch.zeros_like(p)))
            p.mul_(1 - self.lr * self.weight_decay)
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / (1 - beta2 ** self.t) ** 0.5).add_(self.eps)
            p.addcdiv_(m, denom, value=-self.lr / (1 - beta1 ** self.t))


OPTIMIZERS = {"sgd": dict(lr=0.1, momentum=0.9), "adamw": dict(lr=0.01, weight_decay=0.01)}


def make_optimizer(name: str, params, torch_optim: bool = False):
    """The course's SGD or AdamW over the trainable params; torch_optim=True gives torch's own."""
    params = [p for p in params if p.requires_grad]
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}")
    if torch_optim:
        return {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}[name](params, **OPTIMIZERS[name])
    return {"sgd": SGD, "adamw": AdamW}[name](params, **OPTIMIZERS[name])


def train(model: nn.Module, optimizer, inputs, targets, steps: int,
          after_backward=lambda: None, on_step=lambda k: None) -> None:
    """`steps` steps of MSE regression on the same batch; `after_backward`
    is where DDP finishes its gradient synchronization."""
    for k in range(steps):
        on_step(k)
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        after_backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def state_lists(model: nn.Module) -> dict[str, list]:
    """Parameters and buffers by state_dict name, as nested lists (plain data)."""
    return {k: v.detach().tolist() for k, v in model.state_dict().items()}


def trainable_bytes(model: nn.Module) -> list[int]:
    """Bytes of each trainable parameter, in model.parameters() order (tied ones once)."""
    return [p.numel() * p.element_size() for p in model.parameters() if p.requires_grad]


def gradient_lists(model: nn.Module) -> dict[str, list | None]:
    """Every trainable parameter's .grad by its named_parameters() name (tied ones once), as nested
    lists (None where it has none): what a data-parallel wrapper's synchronized gradients are judged by."""
    return {n: None if p.grad is None else p.grad.detach().tolist()
            for n, p in model.named_parameters() if p.requires_grad}


def single_process_run(name: str, optimizer: str, steps: int, seed: int, world_size: int,
                       grad_scale: float = 1.0) -> dict:
    """What DDP on `world_size` ranks must reproduce: rank 0's initial weights
    trained on the whole global batch in one process. {"state": the final
    state (`state_lists`), "grads": per step, the gradients the optimizer
    stepped with (`gradient_lists`): the gradient of the mean loss over the
    whole batch, docs/spec.md, question 4}. (grad_scale models a known mistake:
    world_size for gradients summed instead of averaged, 2 for each gradient
    accumulated twice.)"""
    model = build_model(name, seed)
    inputs, targets = batch(name, seed, world_size)
    grads: list[dict] = []

    def scale():
        with torch.no_grad():
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.mul_(grad_scale)
        grads.append(gradient_lists(model))
    train(model, make_optimizer(optimizer, model.parameters()), inputs, targets, steps, after_backward=scale)
    return {"state": state_lists(model), "grads": grads}


def single_process(name: str, optimizer: str, steps: int, seed: int, world_size: int,
                   grad_scale: float = 1.0) -> dict[str, list]:
    """The final state of `single_process_run`."""
    return single_process_run(name, optimizer, steps, seed, world_size, grad_scale)["state"]


def pipeline_single_process(optimizer: str, steps: int, seed: int, microbatches: int,
                            grad_scale: float = 1.0) -> dict[str, list]:
    """What a pipeline over any number of stages must reproduce: the whole FFNStack
    trained on the whole mini-batch in one process, one full-batch step per step.
    (grad_scale models a known mistake: `microbatches` for the micro-batches'
    gradients summed instead of averaged.)"""
    model = build_ffn(seed)
    inputs, targets = pipeline_batch(seed, microbatches)

    def scale():
        with torch.no_grad():
            for p in model.parameters():
                assert p.grad is not None       # after a backward pass through the whole model
                p.grad.mul_(grad_scale)
    train(model, make_optimizer(optimizer, model.parameters()), inputs, targets, steps, after_backward=scale)
    return state_lists(model)
