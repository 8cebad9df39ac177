"""The toy models and written-out optimizers the DDP runs use."""
import pytest
import torch

from shardlab.autograder.kit.toy_models import (build_model, batch, make_optimizer, single_process, state_lists,
                                                train, trainable_bytes)

pytestmark = pytest.mark.pure


@pytest.mark.parametrize("name", ["frozen_mlp", "tied"])
@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_written_out_optimizers_step_exactly_like_torch_optim(name, optimizer):
    states = []
    for torch_optim in (False, True):
        model = build_model(name, 5)
        x, y = batch(name, 5, 3)
        train(model, make_optimizer(optimizer, model.parameters(), torch_optim), x, y, 4)
        states.append(model.state_dict())
    for key in states[0]:
        assert torch.equal(states[0][key], states[1][key]), key


def test_trainable_bytes_by_hand():
    # fc1 (6->10) weight 60*4, bias 10*4; fc2 frozen; fc3 (10->4, no bias) 40*4; head (4->3) 12*4, 3*4
    assert trainable_bytes(build_model("frozen_mlp", 0)) == [240, 40, 160, 48, 12]
    # enc weight (tied with dec) once: 64*4; mid weight and bias; dec bias
    assert trainable_bytes(build_model("tied", 0)) == [256, 256, 32, 32]


def test_models_depend_on_the_seed_and_training_changes_them():
    a, b = build_model("tied", 0), build_model("tied", 1)
    assert not torch.equal(a.enc.weight, b.enc.weight)
    assert a.dec.weight is a.enc.weight
    before = build_model("frozen_mlp", 0).state_dict()
    after = single_process("frozen_mlp", "sgd", 2, 0, 2)
    assert after["fc2.weight"] == before["fc2.weight"].tolist()      # frozen
    assert after["fc1.weight"] != before["fc1.weight"].tolist()


@pytest.mark.timeout(120)
def test_models_built_on_two_threads_at_once_get_their_own_seeds_weights():
    """The grader's process grades on threads (`shardlab check --jobs`, batches): one computes a
    run's expected values (the single-process model from its seed) while another builds a model
    for a case's notes, a misconception's alternative run, or question 1's measured step. torch's
    global generator is one per process, so unguarded the first model drew some weights from the
    second's seed; its expected values were wrong, and cached for good (a stable 1-of-18 loss on
    the solutions of 4.5, found by `shardlab check` on the a100 course)."""
    import threading

    from shardlab.reference.memory_measure import _measure

    want = {seed: state_lists(build_model("tied", seed)) for seed in range(40)}
    wrong, stop = [], threading.Event()

    def builder():
        for _ in range(5):
            for seed, expected in want.items():
                if state_lists(build_model("tied", seed)) != expected:
                    wrong.append(seed)
        stop.set()

    def other_thread():         # what another grading's thread does meanwhile: seed and draw
        while not stop.is_set():
            build_model("frozen_mlp", 0)
            _measure(8, 16, 1, 4, seed=3)
    threads = [threading.Thread(target=builder), threading.Thread(target=other_thread)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(100)
    assert not any(t.is_alive() for t in threads)
    assert wrong == [], f"{len(wrong)} of {5 * len(want)} models got another thread's weights"
