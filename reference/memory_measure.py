"""Question 1 checked against reality: what a real mixed-precision training
step of the FFN model keeps in memory, measured from the tensors themselves.

The step is PyTorch's own automatic mixed precision, as a GPU run does it,
on CPU (CPU autocast supports bfloat16): FP32 `nn.Linear` weights (the
master weights) run their forward under `torch.autocast(dtype=bfloat16)`,
which casts each weight and the input to BF16 for the matmul; backward
writes FP32 gradients into the weights' `.grad`; `torch.optim.AdamW` steps
them and keeps its FP32 moments. The loss is the mean of the last block's
output, which saves nothing for backward (the course model has no output
layer or loss of its own, docs/spec.md), so every saved byte is the model's.

Everything autograd saves for backward is seen by saved-tensor hooks and
counted once per storage, in one of two terms (docs/spec.md, question 1):

- the weight casts: BF16 copies autocast made of the FP32 weights (a saved
  tensor whose storage was made by a cast of a parameter). Autograd keeps
  the cast of every layer whose input needs a gradient, to compute that
  gradient: every layer's but the first, whose input is the data. 2 bytes
  per parameter of those layers, a term of its own, not an activation;
- the activations: everything else autograd saved, which is the BF16 input
  of every linear layer.

The state is everything the FP32 weights, their gradients and the optimizer
hold: the weights, the gradients, AdamW's two moments per parameter, and
AdamW's step counter, one FP32 scalar tensor per weight matrix (torch keeps
it as a tensor), a term of its own.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from shardlab.reference.cache import once_per_machine


@dataclass(frozen=True)
class MeasuredStep:
    num_params: int            # elements of the FP32 weights
    state_bytes: int           # FP32 weights + FP32 gradients + AdamW's two FP32 moments
    optimizer_step_bytes: int  # AdamW's step counters: every other tensor the optimizer holds
    activation_bytes: int      # bytes autograd saved for backward, the weight casts excepted
    weight_cast_bytes: int     # bytes of autocast's BF16 weight casts autograd saved for backward
    saved_bytes: int           # every byte autograd saved for backward, each storage once


@lru_cache(maxsize=None)
def measure_training_step(d_model: int, d_ff: int, num_blocks: int, tokens: int,
                          seed: int = 0) -> MeasuredStep:
    """The measurement, made once per machine and torch release (`cache`): the
    grader needs it to build part 1.8's cases, before any probe starts, and measuring
    imports torch and its optimizers, seconds that would stand before every grading."""
    args = dict(d_model=d_model, d_ff=d_ff, num_blocks=num_blocks, tokens=tokens, seed=seed)
    return MeasuredStep(**once_per_machine("memory-step", args, lambda: vars(_measure(**args)),
                                           ("shardlab.reference.memory_measure",)))


def _cast_of_a_parameter(t, parameters: set[int]) -> bool:
    """Whether the saved tensor `t` (or the tensor it views, e.g. a weight's
    transpose) was made by autocast's cast of a parameter: its autograd node is a
    copy to another dtype whose input is that parameter's gradient accumulator."""
    base = t if t._base is None else t._base
    node = base.grad_fn
    if node is None or node.name() != "ToCopyBackward0":
        return False
    return any(getattr(nxt, "variable", None) is not None and id(nxt.variable) in parameters
               for nxt, _ in node.next_functions)


def _measure(d_model: int, d_ff: int, num_blocks: int, tokens: int, seed: int) -> MeasuredStep:
    import torch  # imported here: only the real-run check needs torch in the grader

    from shardlab.autograder.kit.toy_models import seeded_cpu_rng

    with seeded_cpu_rng(seed):      # drawn while no other grading's thread seeds the global generator
        layers = []
        for _ in range(num_blocks):
            layers += [torch.nn.Linear(d_model, d_ff, bias=False), torch.nn.Linear(d_ff, d_model, bias=False)]
        model = torch.nn.Sequential(*layers)                              # FP32 master weights
        x = torch.randn(tokens, d_model)                                  # the data, FP32
    weights = list(model.parameters())
    parameters = {id(w) for w in weights}

    saved: dict[int, int] = {}           # storage -> bytes, each storage once
    casts: set[int] = set()              # the storages that are weight casts

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        saved[storage.data_ptr()] = storage.nbytes()
        if _cast_of_a_parameter(t, parameters):
            casts.add(storage.data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(x)                                                # BF16 (T, D)
        loss = out.float().mean()                                         # saves no tensor
    loss.backward()
    optimizer = torch.optim.AdamW(weights, lr=1e-3)
    optimizer.step()

    def nbytes(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    moments = other = 0
    for state in optimizer.state.values():
        for name, value in state.items():
            if not torch.is_tensor(value):
                continue
            if name in ("exp_avg", "exp_avg_sq"):
                moments += nbytes(value)
            else:                                                         # "step": a scalar tensor
                other += nbytes(value)
    grads = sum(nbytes(w.grad) for w in weights if w.grad is not None)
    cast_bytes = sum(saved[s] for s in casts)
    return MeasuredStep(
        num_params=sum(w.numel() for w in weights),
        state_bytes=sum(nbytes(w) for w in weights) + grads + moments,
        optimizer_step_bytes=other,
        activation_bytes=sum(saved.values()) - cast_bytes,
        weight_cast_bytes=cast_bytes,
        saved_bytes=sum(saved.values()),
    )
