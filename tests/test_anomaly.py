"""Anomaly detection (gm.autograd.set_detect_anomaly / detect_anomaly): a NaN gradient stops backward at the node
that returned it, with PyTorch's error type and wording (PyTorch numbers its nodes: SqrtBackward0)."""
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")

NAN_AT = r"Function 'SqrtBackward0?' returned nan values in its 0th output"


@pytest.mark.parametrize("lib", [gm, torch], ids=["gpumemnet", "torch"])
def test_a_nan_gradient_names_its_node(lib):
    a = lib.tensor([0.0, 4.0], requires_grad=True)
    with lib.autograd.detect_anomaly():
        loss = (a.sqrt() * 0.0).sum()  # d sqrt / da at 0 is inf; inf * 0 is NaN
        with pytest.raises(RuntimeError, match=NAN_AT):
            loss.backward()
    assert not lib.is_anomaly_enabled()


@pytest.mark.parametrize("lib", [gm, torch], ids=["gpumemnet", "torch"])
def test_without_detection_the_nan_reaches_grad(lib):
    a = lib.tensor([0.0, 4.0], requires_grad=True)
    (a.sqrt() * 0.0).sum().backward()
    assert a.grad[0].isnan() and a.grad[1] == 0


@pytest.mark.parametrize("lib", [gm, torch], ids=["gpumemnet", "torch"])
def test_set_detect_anomaly_as_call_and_context(lib):
    lib.autograd.set_detect_anomaly(True)
    try:
        assert lib.is_anomaly_enabled() and lib.is_anomaly_check_nan_enabled()
        with lib.autograd.set_detect_anomaly(True, check_nan=False):
            assert not lib.is_anomaly_check_nan_enabled()
            a = lib.tensor([0.0], requires_grad=True)
            (a.sqrt() * 0.0).sum().backward()  # no check: no error
        assert lib.is_anomaly_check_nan_enabled()
    finally:
        lib.autograd.set_detect_anomaly(False)
    assert not lib.is_anomaly_enabled()


def test_a_clean_training_step_is_unchanged_under_detection():
    gm.manual_seed(0)
    model = gm.nn.Sequential(gm.nn.Conv2d(1, 2, 3), gm.nn.ReLU(), gm.nn.Flatten(), gm.nn.Linear(8, 2))
    x, y = gm.randn(3, 1, 4, 4), gm.tensor([0, 1, 1])
    gm.nn.functional.cross_entropy(model(x), y).backward()
    plain = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    with gm.autograd.detect_anomaly():
        gm.nn.functional.cross_entropy(model(x), y).backward()
    for p, g in zip(model.parameters(), plain):
        assert gm.equal(p.grad, g)
