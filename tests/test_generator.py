"""gm.Generator (torch.Generator): streams of their own for rand/randn/randint/randperm(generator=); manual_seed
returns the default generator; no_grad works as a decorator."""
import numpy as np
import pytest

import gpumemnet as gm
from gradcheck import to_numpy


def test_manual_seed_returns_the_default_generator():
    g = gm.manual_seed(5)
    assert g is gm.default_generator and g.initial_seed() == 5 == gm.initial_seed()
    a = gm.rand(3)
    g.manual_seed(5)
    assert gm.rand(3).tolist() == a.tolist()
    state = g.get_state()
    b = gm.rand(2)
    g.set_state(state)
    assert gm.rand(2).tolist() == b.tolist()


def test_a_generator_is_a_stream_of_its_own():
    gm.manual_seed(1)
    ref = [gm.rand(4).tolist(), gm.randn(2, 2).tolist(), gm.randint(0, 100, (5,)).tolist(), gm.randperm(7).tolist()]
    gen = gm.Generator().manual_seed(1)
    gm.manual_seed(99)
    before = gm.get_rng_state()
    got = [gm.rand(4, generator=gen).tolist(), gm.randn(2, 2, generator=gen).tolist(),
           gm.randint(0, 100, (5,), generator=gen).tolist(), gm.randperm(7, generator=gen).tolist()]
    assert got == ref                        # the same seed gives the global generator's numbers
    assert gm.get_rng_state().equal(before)      # and the global generator did not move
    other = gm.Generator().manual_seed(1)
    assert gm.rand(4, generator=other).tolist() == ref[0]  # generators do not share a stream
    assert gen.get_state().numpy().view("<u8")[1] > 0 and gen.initial_seed() == 1  # the offset moved


def test_in_place_fills_draw_from_a_generator():
    """uniform_, normal_ and bernoulli_ with generator= (nn.init's and torchvision's transforms' habit) draw from its
    stream, as the factories do, and leave the global generator where it was."""
    gm.manual_seed(3)
    ref = [gm.rand(5).tolist(), gm.randn(4).tolist(), (gm.rand(6) < 0.3).float().tolist()]
    gen = gm.Generator().manual_seed(3)
    gm.manual_seed(42)
    before = gm.get_rng_state()
    got = [gm.empty(5).uniform_(generator=gen).tolist(), gm.empty(4).normal_(generator=gen).tolist(),
           gm.empty(6).bernoulli_(0.3, generator=gen).tolist()]
    assert got == ref
    assert gm.get_rng_state().equal(before)
    with pytest.raises(TypeError, match="generator: expected a gpumemnet.Generator"):
        gm.empty(2).normal_(generator=7)


def test_generator_errors_and_repr():
    with pytest.raises(TypeError, match="Generator.manual_seed: seed must be an int"):
        gm.Generator().manual_seed(1.5)
    with pytest.raises(TypeError, match="generator: expected a gpumemnet.Generator"):
        gm.rand(2, generator=3)
    assert "seed=7" in repr(gm.Generator("cpu").manual_seed(7)) and gm.Generator().device == "cpu"
    s = gm.seed()
    assert gm.initial_seed() == s


def test_no_grad_is_a_decorator():
    @gm.no_grad()
    def f(x):
        return x * 2

    x = gm.ones(2, requires_grad=True)
    assert not f(x).requires_grad and (x * 2).requires_grad
    np.testing.assert_array_equal(to_numpy(f(x)), [2.0, 2.0])


def test_rng_state_is_a_byte_tensor_as_in_pytorch():
    """Code clones it, stores it in checkpoints and hands it back: a uint8 tensor, as PyTorch's."""
    gm.manual_seed(3)
    state = gm.get_rng_state()
    assert state.dtype == gm.uint8 and tuple(state.shape) == (16,)
    first = gm.rand(5).tolist()
    gm.set_rng_state(state.clone())
    assert gm.rand(5).tolist() == first
    gm.set_rng_state((3, 0))  # the (seed, offset) pair earlier versions returned still works
    assert gm.rand(5).tolist() == first
    with pytest.raises(TypeError, match="set_rng_state: expected the state get_rng_state"):
        gm.set_rng_state(gm.zeros(3))
