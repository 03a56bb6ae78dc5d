"""torch.set_default_device and `with torch.device(...)`, against PyTorch on the meta device (which both have without
a GPU): which factories and layers follow the default, what keeps its own device, nesting and per-thread state."""
import threading

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

FACTORIES = {
    "zeros": lambda L: L.zeros(2, 3), "ones": lambda L: L.ones(2), "empty": lambda L: L.empty(4),
    "full": lambda L: L.full((2,), 1.5), "arange": lambda L: L.arange(5), "linspace": lambda L: L.linspace(0, 1, 5),
    "rand": lambda L: L.rand(3), "randn": lambda L: L.randn(3), "randint": lambda L: L.randint(0, 5, (3,)),
    "randperm": lambda L: L.randperm(4), "eye": lambda L: L.eye(3), "tensor from a list": lambda L: L.tensor([1.0]),
    "as_tensor from a list": lambda L: L.as_tensor([1, 2]), "Linear's weight": lambda L: L.nn.Linear(3, 2).weight,
    "Conv2d's weight": lambda L: L.nn.Conv2d(1, 2, 3).weight,
    "BatchNorm2d's buffer": lambda L: L.nn.BatchNorm2d(2).running_mean,
    "tensor of a CPU tensor": lambda L: L.tensor(L.ones(2, device="cpu")),
    "explicit device": lambda L: L.zeros(2, device="cpu"), "from_numpy": lambda L: L.from_numpy(np.ones(2)),
    "zeros_like of a CPU tensor": lambda L: L.zeros_like(L.ones(2, device="cpu")),
}


@pytest.mark.parametrize("case", FACTORIES)
def test_factories_follow_the_default_device_as_in_pytorch(case):
    with torch.device("meta"):
        want = FACTORIES[case](torch).device.type
    with gm.device("meta"):
        assert FACTORIES[case](gm).device.type == want
    torch.set_default_device("meta")
    gm.set_default_device("meta")
    try:
        want = FACTORIES[case](torch).device.type
        assert FACTORIES[case](gm).device.type == want
        assert str(gm.get_default_device()) == str(torch.get_default_device()) == "meta"
    finally:
        torch.set_default_device(None)
        gm.set_default_device(None)
    assert gm.zeros(1).device.type == "cpu" and str(gm.get_default_device()) == "cpu"


def test_contexts_nest_and_each_thread_has_its_own_default():
    with gm.device("meta"):
        with gm.device("cpu"):
            assert gm.zeros(1).device.type == "cpu"
        assert gm.zeros(1).device.type == "meta"
        seen = []
        t = threading.Thread(target=lambda: seen.append(gm.zeros(1).device.type))
        t.start()
        t.join()
        assert seen == ["cpu"]  # the other thread never entered the block
    assert gm.zeros(1).device.type == "cpu"
    with pytest.raises(ValueError):
        with gm.device("meta"):
            raise ValueError("the block's error goes through")
    assert gm.zeros(1).device.type == "cpu"  # and the default is restored


def test_a_model_built_on_meta_costs_no_memory():
    before = gm.memory.memory_allocated("cpu")
    with gm.device("meta"):
        m = gm.nn.Sequential(gm.nn.Conv2d(3, 64, 3), gm.nn.BatchNorm2d(64), gm.nn.Linear(64, 1000))
    assert all(p.device.type == "meta" for p in m.parameters())
    assert gm.memory.memory_allocated("cpu") == before
