"""Names and argument forms real PyTorch scripts use, each against PyTorch: Embedding.from_pretrained (GloVe
setups), torch.cpu.amp.autocast, the uint16/32/64 dtype names torchvision compares with, Tensor.H, StepLR with a
float step (the text-classification tutorial), a one-element tensor as lr, an IterableDataset without a length
(len() raises TypeError, which list() and tqdm catch), and, under the drop-in alias, dtypes and sizes printed
as torch.* (code compares str(x.dtype) with "torch.float16")."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")


def test_embedding_from_pretrained():
    w = np.arange(12.0).reshape(4, 3)
    for freeze in (True, False):
        ours = gm.nn.Embedding.from_pretrained(gm.tensor(w), freeze=freeze, padding_idx=1)
        ref = torch.nn.Embedding.from_pretrained(torch.tensor(w), freeze=freeze, padding_idx=1)
        assert ours.weight.requires_grad == ref.weight.requires_grad and repr(ours) == repr(ref)
        idx = [[1, 3], [0, 2]]
        np.testing.assert_array_equal(ours(gm.tensor(idx)).detach().numpy(), ref(torch.tensor(idx)).detach().numpy())


def test_cpu_amp_autocast_and_names():
    x = gm.randn(4, 4)
    with gm.cpu.amp.autocast():
        assert (x @ x).dtype == gm.bfloat16
    with gm.cpu.amp.autocast(enabled=False):
        assert (x @ x).dtype == gm.float32
    assert gm.cpu.is_available() and gm.cpu.device_count() == 1
    for name in ("uint16", "uint32", "uint64"):
        assert getattr(gm, name).itemsize == getattr(torch, name).itemsize and not getattr(gm, name).is_signed
    with pytest.raises(TypeError, match="no uint16 tensors"):
        gm.zeros(2, dtype=gm.uint16)


def test_tensor_h():
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(gm.tensor(a).H.numpy(), torch.tensor(a).H.numpy())
    assert gm.tensor(2.0).H.item() == 2.0
    with pytest.raises(RuntimeError, match="only supported on matrices"):
        gm.zeros(3).H


def test_step_lr_with_a_float_step_and_a_tensor_lr():
    def lrs(L):
        p = L.nn.Parameter(L.zeros(2))
        p.grad = L.ones(2)
        opt = L.optim.SGD([p], lr=L.tensor(1.0))
        sched = L.optim.lr_scheduler.StepLR(opt, 1.0, gamma=0.5)
        out = []
        for _ in range(3):
            opt.step()
            sched.step()
            out.append(float(sched.get_last_lr()[0]))
        return out
    assert lrs(gm) == lrs(torch)
    p = gm.nn.Parameter(gm.ones(2))
    p.grad = gm.ones(2)
    gm.optim.Adam([p], lr=gm.tensor(0.01)).step()
    np.testing.assert_allclose(p.detach().numpy(), [0.99, 0.99], rtol=1e-6)


def test_iterable_dataset_without_len():
    class Stream(gm.utils.data.IterableDataset):
        def __iter__(self):
            return iter(gm.tensor([i]) for i in range(5))
    with pytest.raises(TypeError):
        len(Stream())
    batches = list(gm.utils.data.DataLoader(Stream(), batch_size=2))  # list() asks len() and takes the TypeError
    assert [b.tolist() for b in batches] == [[[0], [1]], [[2], [3]], [[4]]]


def test_names_print_as_torch_under_the_alias(tmp_path):
    script = tmp_path / "names.py"
    script.write_text(textwrap.dedent("""
        import torch
        x = torch.zeros(2, 3, dtype=torch.float16)
        assert str(x.dtype) == "torch.float16", str(x.dtype)
        assert getattr(torch, str(torch.bfloat16).replace("torch.", "")) is torch.bfloat16
        print(x.shape, torch.channels_last, repr(torch.ones(1, dtype=torch.float64)))
    """))
    out = subprocess.run([sys.executable, "-m", "gpumemnet", "run", "--no-estimate", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "torch.Size([2, 3]) torch.channels_last tensor([1.], dtype=torch.float64)"
    assert repr(gm.float16) == "gpumemnet.float16"  # outside the alias: gpumemnet's own name


def test_default_collate_keeps_strings_as_they_come():
    for batch in ([(1, "x"), (2, "y")], ["a", "b"], [{"s": "a", "n": 1.5}, {"s": "b", "n": 2.5}]):
        ours, ref = gm.utils.data.default_collate(batch), torch.utils.data.default_collate(batch)
        assert type(ours) is type(ref)
        if isinstance(ref, list) and isinstance(ref[0], torch.Tensor):
            assert ours[1] == ref[1] and ours[0].tolist() == ref[0].tolist()
        elif isinstance(ref, dict):
            assert ours["s"] == ref["s"] and ours["n"].tolist() == ref["n"].tolist()
        else:
            assert ours == ref


def test_int64_checks_hold_under_the_alias(tmp_path):
    """Checks that compared a dtype's printed name broke when dtypes print as torch.* (max_unpool2d, SegNet's
    decoder; multi_margin_loss)."""
    script = tmp_path / "unpool.py"
    script.write_text(textwrap.dedent("""
        import torch
        import torch.nn.functional as F
        y, i = F.max_pool2d(torch.arange(16.).view(1, 1, 4, 4), 2, return_indices=True)
        print(F.max_unpool2d(y, i, 2).sum().item(), torch.strided)
        print(round(F.multi_margin_loss(torch.tensor([[.1, .8, .3]]), torch.tensor([1])).item(), 6))
    """))
    out = subprocess.run([sys.executable, "-m", "gpumemnet", "run", "--no-estimate", str(script)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["40.0", "torch.strided", "0.266667"]


def test_triangular_solve_mvlgamma_div_rounding_fork_rng():
    a = np.tril(np.random.default_rng(1).standard_normal((3, 3))) + 3 * np.eye(3)
    b = np.random.default_rng(2).standard_normal((3, 2))
    for upper, transpose in ((False, False), (False, True), (True, False)):
        A = a.T if upper else a
        ours = gm.triangular_solve(gm.tensor(b), gm.tensor(A), upper=upper, transpose=transpose)
        ref = torch.triangular_solve(torch.tensor(b), torch.tensor(A), upper=upper, transpose=transpose)
        np.testing.assert_allclose(ours.solution.numpy(), ref.solution.numpy(), rtol=1e-12)
        np.testing.assert_array_equal(ours[1].numpy(), ref.cloned_coefficient.numpy())
    x = np.array([2.5, 3.0, 4.2])
    np.testing.assert_allclose(gm.mvlgamma(gm.tensor(x), 3).numpy(), torch.mvlgamma(torch.tensor(x), 3).numpy())
    for mode in (None, "floor", "trunc"):
        ours, ref = gm.tensor([5.0, -7.0]), torch.tensor([5.0, -7.0])
        ours.div_(2, rounding_mode=mode)
        ref.div_(2, rounding_mode=mode)
        assert ours.tolist() == ref.tolist()
    gm.manual_seed(0)
    with gm.random.fork_rng():
        inside = gm.rand(3).tolist()
    assert gm.rand(3).tolist() == inside  # the draw inside did not move the generator outside


def test_numpy_scalars_keep_their_dtype_and_assignment_drops_leading_ones():
    for data in ([np.float64(1.0)], [np.float32(1.0), 2.0], [1.0, 2], [[np.float16(1)], [np.float16(2)]]):
        assert repr(gm.tensor(data).dtype).split(".")[1] == repr(torch.tensor(data).dtype).split(".")[1]
    a = gm.zeros(3, 2)
    a[1] = gm.ones(1, 2)
    c = gm.zeros(3, 2)
    c[:, 0] = gm.ones(1, 3)
    assert a.tolist() == [[0, 0], [1, 1], [0, 0]] and c.tolist() == [[1, 0], [1, 0], [1, 0]]
    v = gm.ones(1, 2, requires_grad=True)
    x = gm.zeros(3, 2) * 1.0
    x[1] = v * 2
    x.sum().backward()
    assert v.grad.tolist() == [[2.0, 2.0]]


def test_default_dtype_reaches_the_layers():
    prev = gm.get_default_dtype()
    gm.set_default_dtype(gm.float64)
    try:
        for m in (gm.nn.Linear(2, 2), gm.nn.Conv2d(1, 2, 3), gm.nn.LayerNorm(3), gm.nn.GRU(2, 2),
                  gm.nn.Embedding(3, 2), gm.nn.Parameter()):
            params = list(m.parameters()) if isinstance(m, gm.nn.Module) else [m]
            assert all(p.dtype == gm.float64 for p in params), type(m).__name__
        assert gm.nn.Linear(2, 2)(gm.ones(2)).dtype == gm.float64
    finally:
        gm.set_default_dtype(prev)


def test_retained_grad_is_taken_after_the_hooks():
    def run(L):
        x = L.ones(2, requires_grad=True)
        h = x * 3
        h.retain_grad()
        h.register_hook(lambda g: g * 2)
        h.sum().backward()
        return h.grad.tolist(), x.grad.tolist()
    assert run(gm) == run(torch)


def test_sums_into_narrow_integer_dtypes():
    """scatter_add_ / index_add_ into uint8 / int16 / int32 (torchvision's v2 equalize, and so RandAugment, on
    uint8 images), as PyTorch computes them."""
    for name in ("uint8", "int16", "int32"):
        for L in (gm, torch):
            dt = getattr(L, name)
            a = L.zeros(3, dtype=dt).scatter_add_(0, L.tensor([0, 2, 2]), L.ones(3, dtype=dt))
            b = L.zeros(3, dtype=dt).index_add_(0, L.tensor([1, 1, 0]), L.full((3,), 3, dtype=dt))
            if L is gm:
                ours = (a.tolist(), b.tolist())
            else:
                assert ours == (a.tolist(), b.tolist()), name


def test_uint8_bilinear_and_bicubic_resizes_round_as_pytorch():
    img = (np.arange(2 * 3 * 9 * 11) * 37 % 256).astype(np.uint8).reshape(2, 3, 9, 11)
    for mode in ("bilinear", "bicubic"):
        for antialias in (False, True):
            ours = gm.nn.functional.interpolate(gm.tensor(img), size=(5, 7), mode=mode, antialias=antialias)
            ref = torch.nn.functional.interpolate(torch.tensor(img), size=(5, 7), mode=mode, antialias=antialias)
            assert ours.dtype == gm.uint8
            diff = np.abs(ours.numpy().astype(int) - ref.numpy().astype(int))
            # PyTorch's uint8 kernels sum in fixed point: some pixels land a step away from float32's rounding (two
            # for plain bicubic, where PyTorch's own float32 result rounded is as far from its uint8 one)
            assert diff.max() <= 2 and diff.mean() < 0.2, (mode, antialias, diff.max(), diff.mean())


def test_small_integer_powers_are_products_as_in_pytorch():
    """x ** 2 is x * x (not the library's powf, an ulp off on some inputs), x ** 3 is x * x * x, x ** -1 and
    x ** -2 reciprocals: bit for bit PyTorch's float32 results. x ** 0.5 is sqrt, correctly rounded (PyTorch's
    vector pow lands an ulp away on 0.6% of these)."""
    x = np.linspace(-12, 12, 20001).astype(np.float32)
    for e in (2, 3, 0.5, -1, -2, 2.5):
        a = np.abs(x) + 0.01 if e in (0.5, 2.5) else x
        ours, ref = (gm.tensor(a) ** e).numpy(), (torch.tensor(a) ** e).numpy()
        if e in (0.5, 2.5):  # within an ulp
            np.testing.assert_allclose(ours, ref, rtol=2e-7)
        else:
            np.testing.assert_array_equal(ours, ref, err_msg=str(e))
