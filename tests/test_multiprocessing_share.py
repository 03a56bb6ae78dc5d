"""Tensor.share_memory_ and torch.multiprocessing: shared CPU memory that forked, spawned and forkserver children
write (hogwild training), and the torch alias reaching spawned children (gpumemnet.dropin).

The in-process cases fork (Linux); the cases with spawn and forkserver run scripts in a fresh interpreter, under
`python -m gpumemnet run` and, where PyTorch is installed, under PyTorch too, for the same numbers."""
import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

import gpumemnet as gm
import gpumemnet.multiprocessing as gm_mp

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memfd shared memory: Linux")


def _param(values):
    return gm.nn.Parameter(gm.tensor(values))


def test_share_memory_in_place_keeps_identity_flags_and_grad():
    p = _param([1.0, 2.0, 3.0])
    p.grad = gm.full((3,), 0.5)
    grad = p.grad
    assert not p.is_shared()
    assert p.share_memory_() is p
    assert p.is_shared() and p[1:].is_shared()  # a view of shared memory is shared, as in PyTorch
    assert p.requires_grad and p._is_param and isinstance(p, gm.nn.Parameter)
    assert p.grad is grad and not grad.is_shared()  # the gradient is not moved (PyTorch's neither)
    assert p.tolist() == [1.0, 2.0, 3.0]
    assert not gm.ones(2).is_shared()


def test_share_memory_twice_stays():
    t = gm.arange(4.0).share_memory_()
    ptr = t.data_ptr()
    t.share_memory_()
    assert t.data_ptr() == ptr


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8",
                                   "bool"])
def test_share_memory_dtypes(dtype):
    t = gm.arange(6).reshape(2, 3).to(getattr(gm, dtype))
    want = t.tolist()
    assert t.share_memory_().is_shared() and t.tolist() == want and t.dtype == getattr(gm, dtype)


def test_share_memory_non_contiguous_empty_and_non_leaf():
    t = gm.arange(6.0).reshape(2, 3).t()
    assert t.share_memory_().tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]] and t.is_shared()
    assert gm.empty(0).share_memory_().is_shared()
    x = gm.ones(2, requires_grad=True) * 2
    x.share_memory_()
    assert x.is_shared() and x.grad_fn is not None


def test_share_memory_meta_refused():
    with pytest.raises(RuntimeError, match="only available on CPU"):
        gm.empty(2, device="meta").share_memory_()


@pytest.mark.skipif(not gm.cuda.is_available(), reason="needs CUDA")
def test_share_memory_cuda_is_a_noop():
    t = gm.ones(3, device="cuda")
    ptr = t.data_ptr()
    assert t.share_memory_() is t and t.data_ptr() == ptr and t.is_shared()  # PyTorch: True on CUDA


def test_optimizer_built_before_share_updates_the_shared_parameters():
    model = gm.nn.Linear(3, 1)
    opt = gm.optim.SGD(model.parameters(), lr=0.5)
    for p in model.parameters():
        p.share_memory_()
    before = [p.detach().clone() for p in model.parameters()]
    model(gm.ones(1, 3)).sum().backward()
    opt.step()
    for p, b in zip(model.parameters(), before):
        assert p.is_shared()
        assert gm.allclose(p.detach(), b - 0.5 * p.grad)


def test_module_share_memory():
    model = gm.nn.Sequential(gm.nn.Linear(2, 2), gm.nn.BatchNorm1d(2))
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters())
    assert all(b.is_shared() for b in model.buffers() if b.is_floating_point())


def test_memory_reports_do_not_count_shared_memory():
    from gpumemnet.memory import memory_allocated, memory_summary
    p = gm.nn.Parameter(gm.ones(1 << 16))
    before = memory_allocated("cpu")
    p.share_memory_()
    assert memory_allocated("cpu") <= before - (1 << 18)  # the old storage freed, the shared block not counted
    assert "memory summary" in memory_summary("cpu")
    assert float(p.sum()) == 1 << 16


def _add_one(t):
    with gm.no_grad():
        t.add_(1)


def test_forked_child_writes_the_parents_memory():
    ctx = multiprocessing.get_context("fork")
    shared, private = gm.zeros(3).share_memory_(), gm.zeros(3)
    for t in (shared, shared[1:], private):
        proc = ctx.Process(target=_add_one, args=(t,))
        proc.start()
        proc.join()
        assert proc.exitcode == 0
    assert shared.tolist() == [1.0, 2.0, 2.0] and private.tolist() == [0.0, 0.0, 0.0]


def _train(rank, model, lock, steps):
    opt = gm.optim.SGD(model.parameters(), lr=0.25)
    x = gm.full((1, 4), float(rank + 1))
    for _ in range(steps):
        with lock:  # the updates serialized: the result is exact (hogwild itself races, by design)
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()


def test_hogwild_fork_trains_the_parents_model():
    ctx = gm_mp.get_context("fork")
    model = gm.nn.Linear(4, 1)
    with gm.no_grad():
        model.weight.fill_(1.0)
        model.bias.fill_(0.5)
    for p in model.parameters():
        p.share_memory_()
    lock = ctx.Lock()
    procs = [ctx.Process(target=_train, args=(rank, model, lock, 3)) for rank in range(3)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    assert [proc.exitcode for proc in procs] == [0, 0, 0]
    # each step of process r subtracts 0.25 * (r + 1) from every weight and 0.25 from the bias
    assert model.weight.tolist() == [[1.0 - 0.25 * 3 * (1 + 2 + 3)] * 4]
    assert model.bias.tolist() == [0.5 - 0.25 * 9]


def test_queue_passes_shared_memory_and_copies_the_rest():
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    shared, private = gm.zeros(2).share_memory_(), gm.zeros(2)
    proc = ctx.Process(target=_add_from_queue, args=(q,))
    proc.start()
    q.put((shared, private))
    proc.join(30)
    assert proc.exitcode == 0
    assert shared.tolist() == [1.0, 1.0] and private.tolist() == [0.0, 0.0]


def _add_from_queue(q):
    shared, private = q.get()  # started before the tensors existed: the fd travels through the Queue
    assert shared.is_shared() and not private.is_shared()
    _add_one(shared)
    _add_one(private)


def test_pickle_for_files_copies_values():
    t = gm.arange(3.0).share_memory_()
    back = pickle.loads(pickle.dumps(t))
    assert back.tolist() == [0.0, 1.0, 2.0] and not back.is_shared()


# PyTorch code run in a fresh interpreter, by `python -m gpumemnet run` and by PyTorch.
HOGWILD = """
    import sys
    import torch
    import torch.nn as nn
    import torch.multiprocessing as mp

    def train(rank, model, lock, steps):
        import torch
        print("child", rank, torch.__file__.split("/")[-2], flush=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.25)
        x = torch.full((1, 4), float(rank + 1))
        for _ in range(steps):
            with lock:
                opt.zero_grad()
                model(x).sum().backward()
                opt.step()

    if __name__ == "__main__":
        ctx = mp.get_context(sys.argv[1])
        model = nn.Linear(4, 1)
        with torch.no_grad():
            model.weight.fill_(1.0)
            model.bias.fill_(0.5)
        for p in model.parameters():
            p.share_memory_()
        lock = ctx.Lock()
        procs = [ctx.Process(target=train, args=(rank, model, lock, 3)) for rank in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        print("exitcodes", [p.exitcode for p in procs])
        print("weights", model.weight.tolist(), model.bias.tolist())
"""


def _run(tmp_path, source, *args, under_gpumemnet=True):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    cmd = [sys.executable] + (["-m", "gpumemnet", "run"] if under_gpumemnet else []) + [str(script), *args]
    r = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def _has_pytorch():
    r = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, timeout=120)
    return r.returncode == 0


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_hogwild_script_matches_pytorch(tmp_path, method):
    out = _run(tmp_path, HOGWILD, method)
    assert "exitcodes [0, 0]" in out
    assert "weights [[-1.25, -1.25, -1.25, -1.25]] [-1.0]" in out  # 1 - 0.25 * 3 * (1 + 2); 0.5 - 0.25 * 6
    assert out.count("gpumemnet") == 2, out  # both children: torch is gpumemnet there too
    if method == "spawn" and _has_pytorch():  # one PyTorch run (seconds to import): the expected numbers
        ref = _run(tmp_path, HOGWILD, method, under_gpumemnet=False)
        assert [line for line in ref.splitlines() if line.startswith("weights")] == \
            [line for line in out.splitlines() if line.startswith("weights")]


SPAWNED = """
    import sys
    import torch
    import torch.multiprocessing as mp

    def child(rank, tag):
        import torch
        t = torch.ones(2)
        with torch.no_grad():
            t.add_(1)
        print(tag, torch.__file__.split("/")[-2], type(t).__mro__[1].__module__, flush=True)

    if __name__ == "__main__":
        print("parent", torch.__file__.split("/")[-2], flush=True)
        mp.spawn(child, args=("mp.spawn",), nprocs=1, join=True)
        for method in ("spawn", "forkserver"):
            p = mp.get_context(method).Process(target=child, args=(0, method))
            p.start()
            p.join()
            assert p.exitcode == 0, method
"""


def test_spawned_children_get_the_alias(tmp_path):
    out = _run(tmp_path, SPAWNED)
    for tag in ("mp.spawn", "spawn", "forkserver"):
        assert f"{tag} gpumemnet gpumemnet._C" in out, out
