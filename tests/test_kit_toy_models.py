"""The toy models and written-out optimizers the DDP runs use."""
import pytest
import torch

from shardlab.autograder.kit.toy_models import (build_model, batch, make_optimizer, single_process, train,
                                                trainable_bytes)

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
