"""gm.optim: the fused SGD / Adam / AdamW steps against a NumPy re-implementation of PyTorch's update formulas
(every option, several steps, several parameter groups, every float dtype), the memory guarantees (a step
allocates nothing; the first step allocates exactly the state, tagged "optimizer"), state_dict round trips
(directly and through gm.save / gm.load), the no-learning warning of seed 000, argument errors, the C entry
points' validation, and the lr schedulers against their formulas. Where PyTorch is importable, the same runs are
compared with torch.optim."""
import math
import warnings

import numpy as np
import pytest

import gpumemnet as gm
import gpumemnet.optim as optim
from gpumemnet import _C
from gpumemnet.optim import lr_scheduler
from gpumemnet.serialization import load as gm_load, save as gm_save
from gradcheck import assert_close, to_numpy

MiB = 1024 * 1024
_rng = np.random.default_rng(1234)


# ---- the problem every optimizer test runs: a quadratic with a known gradient ---------------------------------------
class Problem:
    """Parameters x_k with loss sum_k sum(0.5 * c_k * x_k**2 + b_k * x_k): grad_k = c_k * x_k + b_k. The gradient
    depends on the parameters, so the steps interact as in training."""

    def __init__(self, shapes, seed=0):
        rng = np.random.default_rng(seed)
        self.x0 = [rng.standard_normal(s) for s in shapes]
        self.c = [rng.uniform(0.5, 2.0, s) for s in shapes]
        self.b = [rng.standard_normal(s) for s in shapes]

    def grads_np(self, xs):
        return [c * x + b for c, x, b in zip(self.c, xs, self.b)]

    def params(self, dtype=gm.float64):
        return [gm.tensor(x, dtype=dtype, requires_grad=True) for x in self.x0]

    def backward(self, params):
        loss = None
        for p, c, b in zip(params, self.c, self.b):
            ct, bt = gm.tensor(c, dtype=p.dtype), gm.tensor(b, dtype=p.dtype)
            term = (p * p * ct * 0.5 + p * bt).sum()
            loss = term if loss is None else loss + term
        loss.backward()
        return loss


SHAPES = [(3, 4), (5,), (2, 3, 2)]
GROUPS = [[0, 1], [2]]  # the parameter indices of each group


def run_gm(cls, group_opts, steps, dtype=gm.float64, problem=None):
    pb = problem or Problem(SHAPES)
    ps = pb.params(dtype)
    groups = [dict(params=[ps[i] for i in idx], **opts) for idx, opts in zip(GROUPS, group_opts)]
    opt = cls(groups)
    for _ in range(steps):
        opt.zero_grad()
        pb.backward(ps)
        opt.step()
    return [to_numpy(p).astype(np.float64) for p in ps], opt


# NumPy re-implementations, written from PyTorch's documented algorithms (torch/optim/sgd.py, adam.py).
def ref_sgd(x, grad_fn, steps, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
            maximize=False):
    x = x.copy()
    buf = None
    for _ in range(steps):
        g = grad_fn(x)
        if maximize:
            g = -g
        if weight_decay:
            g = g + weight_decay * x
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        x = x - lr * g
    return x


def ref_adam(x, grad_fn, steps, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False,
             maximize=False, decoupled=False):
    x = x.copy()
    b1, b2 = betas
    m = np.zeros_like(x)
    v = np.zeros_like(x)
    vmax = np.zeros_like(x)
    for t in range(1, steps + 1):
        g = grad_fn(x)
        if maximize:
            g = -g
        if weight_decay:
            if decoupled:
                x = x * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * x
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        if amsgrad:
            vmax = np.maximum(vmax, v)
            denom = np.sqrt(vmax) / math.sqrt(bc2) + eps
        else:
            denom = np.sqrt(v) / math.sqrt(bc2) + eps
        x = x - (lr / bc1) * m / denom
    return x


def run_ref(ref, group_opts, steps, problem=None):
    pb = problem or Problem(SHAPES)
    out = [None] * len(pb.x0)
    for idx, opts in zip(GROUPS, group_opts):
        for i in idx:
            out[i] = ref(pb.x0[i], lambda x, i=i: pb.c[i] * x + pb.b[i], steps, **opts)
    return out


SGD_CASES = {
    "plain": [dict(lr=0.1), dict(lr=0.05)],
    "momentum": [dict(lr=0.1, momentum=0.9), dict(lr=0.05, momentum=0.5)],
    "dampening": [dict(lr=0.1, momentum=0.9, dampening=0.3), dict(lr=0.1, momentum=0.8, dampening=0.9)],
    "nesterov": [dict(lr=0.1, momentum=0.9, nesterov=True), dict(lr=0.02, momentum=0.7, nesterov=True)],
    "weight_decay": [dict(lr=0.1, weight_decay=0.1), dict(lr=0.1, momentum=0.9, weight_decay=0.01)],
    "maximize": [dict(lr=0.01, maximize=True), dict(lr=0.01, momentum=0.9, maximize=True, weight_decay=0.1)],
    "everything": [dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.05, maximize=True),
                   dict(lr=0.2, momentum=0.6, dampening=0.1, weight_decay=0.2)],
}

ADAM_CASES = {
    "plain": [dict(lr=0.1), dict(lr=0.01)],
    "betas_eps": [dict(lr=0.1, betas=(0.8, 0.99), eps=1e-3), dict(lr=0.05, betas=(0.3, 0.5), eps=0.0)],
    "weight_decay": [dict(lr=0.1, weight_decay=0.1), dict(lr=0.1, weight_decay=0.5)],
    "amsgrad": [dict(lr=0.1, amsgrad=True), dict(lr=0.3, amsgrad=True, betas=(0.5, 0.6))],
    "maximize": [dict(lr=0.1, maximize=True), dict(lr=0.1, maximize=True, weight_decay=0.2, amsgrad=True)],
}


@pytest.mark.parametrize("case", list(SGD_CASES))
def test_sgd_matches_reference(case):
    got, _ = run_gm(optim.SGD, SGD_CASES[case], steps=5)
    ref = run_ref(ref_sgd, SGD_CASES[case], steps=5)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert_close(g, r, atol=1e-12, rtol=1e-12, what=f"SGD {case}: param {k}")


@pytest.mark.parametrize("decoupled", [False, True], ids=["Adam", "AdamW"])
@pytest.mark.parametrize("case", list(ADAM_CASES))
def test_adam_matches_reference(case, decoupled):
    cls = optim.AdamW if decoupled else optim.Adam
    opts = [dict(o) for o in ADAM_CASES[case]]
    for o in opts:
        o.setdefault("weight_decay", 0.0)  # AdamW's default is 1e-2; the cases say what they mean
    got, opt = run_gm(cls, opts, steps=6)
    ref = run_ref(lambda *a, **k: ref_adam(*a, decoupled=decoupled, **k), opts, steps=6)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert_close(g, r, atol=1e-12, rtol=1e-10, what=f"{cls.__name__} {case}: param {k}")
    for group in opt.param_groups:
        for p in group["params"]:
            st = opt.state[p]
            assert st["step"] == 6
            assert ("max_exp_avg_sq" in st) == bool(group["amsgrad"])


def test_adamw_default_weight_decay_is_decoupled():
    got, _ = run_gm(optim.AdamW, [dict(lr=0.1), dict(lr=0.1)], steps=3)
    ref = run_ref(lambda *a, **k: ref_adam(*a, weight_decay=1e-2, decoupled=True, **k),
                  [dict(lr=0.1), dict(lr=0.1)], steps=3)
    for g, r in zip(got, ref):
        assert_close(g, r, atol=1e-12, rtol=1e-10, what="AdamW default weight_decay")


def _round_to(x, dtype):
    """x rounded to dtype (nearest even) and back to float64: what a state tensor of that dtype stores."""
    if dtype == gm.bfloat16:
        bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
        bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
        return bits.astype(np.uint32).view(np.float32).astype(np.float64)
    return np.asarray(x).astype({gm.float32: np.float32, gm.float16: np.float16}[dtype]).astype(np.float64)


@pytest.mark.parametrize("dtype,ulp", [(gm.float32, 2.0 ** -23), (gm.float16, 2.0 ** -10),
                                       (gm.bfloat16, 2.0 ** -7)], ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW"])
def test_lower_precision_dtypes(cls, dtype, ulp):
    """Two steps in float32 / float16 / bfloat16: state kept in the parameter's dtype (stored rounded, as PyTorch
    stores it), arithmetic in float. The reference rounds exactly what is stored; the rest is float64."""
    pb = Problem(SHAPES, seed=3)
    ps = pb.params(dtype)
    # eps=1e-3: with PyTorch's 1e-8, a float16 exp_avg_sq that underflows to 0 sends the parameter flying, in
    # PyTorch and here alike; that is float16 state, not what this test is about.
    lr, wd, eps = 0.1, 0.1, 1e-3
    opt = getattr(optim, cls)(ps, lr=lr, weight_decay=wd, **(dict(momentum=0.9) if cls == "SGD" else dict(eps=eps)))
    for k, p in enumerate(ps):
        x = to_numpy(p).astype(np.float64)
        m = v = None
        for t in (1, 2):
            g = _round_to(pb.c[k] * x + pb.b[k], dtype)
            p.grad = gm.tensor(g, dtype=dtype)
            if cls == "SGD":
                d = g + wd * x
                m = _round_to(d if m is None else 0.9 * m + d, dtype)
                x_new = x - lr * m
            else:
                if cls == "AdamW":
                    x = x * (1 - lr * wd)
                else:
                    g = g + wd * x
                m = _round_to(0.1 * g if m is None else 0.9 * m + 0.1 * g, dtype)
                v = _round_to(0.001 * g * g if v is None else 0.999 * v + 0.001 * g * g, dtype)
                x_new = x - lr / (1 - 0.9 ** t) * m / (np.sqrt(v) / math.sqrt(1 - 0.999 ** t) + eps)
            opt.step()
            got = to_numpy(p).astype(np.float64)
            # float arithmetic, then one rounding to the dtype: within 2 units in the last place
            assert_close(got, x_new, atol=1e-6, rtol=2 * ulp, what=f"{cls} {dtype}: param {k} step {t}")
            x = got
            for key, s in opt.state[p].items():
                if key != "step":
                    assert s.dtype == dtype, f"{cls} state {key} has dtype {s.dtype}, expected {dtype}"
            p.grad = None


def test_parameters_without_grad_are_skipped_and_counted_separately():
    """A parameter gets state (and its own step count) only once it has a gradient; Adam's bias corrections use
    each parameter's own count."""
    pb = Problem([(4,), (3,)])
    a, b = pb.params()
    opt = optim.Adam([a, b], lr=0.1)
    xb = pb.x0[1].copy()
    for step in range(3):
        opt.zero_grad()
        pb.backward([a, b])
        if step == 0:
            b.grad = None  # b sits out the first step
        opt.step()
    assert opt.state[a]["step"] == 3 and opt.state[b]["step"] == 2
    assert_close(to_numpy(a), ref_adam(pb.x0[0], lambda x: pb.c[0] * x + pb.b[0], 3, lr=0.1), 1e-12, 1e-10,
                 what="a after 3 steps")
    assert_close(to_numpy(b), ref_adam(xb, lambda x: pb.c[1] * x + pb.b[1], 2, lr=0.1), 1e-12, 1e-10,
                 what="b after its 2 steps")


def test_non_contiguous_parameter():
    base = gm.tensor(_rng.standard_normal((4, 3)))
    p = base.T  # a transposed view: the kernel works on a workspace copy that is written back
    p.requires_grad = True
    x0 = to_numpy(p)
    g = _rng.standard_normal((3, 4))
    p.grad = gm.tensor(g)
    opt = optim.Adam([p], lr=0.1, amsgrad=True)
    before = gm.memory.memory_stats()["by_category"]["workspace"]["current"]
    opt.step()
    assert gm.memory.memory_stats()["by_category"]["workspace"]["current"] == before, "workspace not freed"
    assert_close(to_numpy(p), ref_adam(x0, lambda x: g, 1, lr=0.1, amsgrad=True), 1e-12, 1e-10, what="p.T")
    assert_close(to_numpy(base), to_numpy(p).T, 0, 0, what="the base sees the update")


def test_step_bumps_the_version_of_params():
    p = gm.tensor([1.0, 2.0], requires_grad=True)
    p.grad = gm.tensor([0.5, 0.5])
    v = p._version
    optim.SGD([p], lr=0.1).step()
    assert p._version > v


def test_closure_runs_with_grad_enabled():
    pb = Problem([(3,)])
    (p,) = pb.params()
    opt = optim.SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        return pb.backward([p])
    with gm.no_grad():
        loss = opt.step(closure)
    assert isinstance(loss, gm.Tensor)
    assert_close(to_numpy(p), ref_sgd(pb.x0[0], lambda x: pb.c[0] * x + pb.b[0], 1, lr=0.1), 1e-12, 1e-12,
                 what="closure step")


def test_zero_grad():
    p = gm.tensor([1.0, 2.0], requires_grad=True)
    p.grad = gm.tensor([3.0, 4.0])
    opt = optim.SGD([p], lr=0.1)
    g = p.grad
    opt.zero_grad(set_to_none=False)
    assert p.grad is g and to_numpy(g).tolist() == [0.0, 0.0]
    opt.zero_grad()
    assert p.grad is None


# ---- memory ---------------------------------------------------------------------------------------------------------
def _big_params(device="cpu"):
    # 6 x 16 MiB float32 (~100 MB): each a whole number of the allocator's 2 MiB rounding, so bytes are exact
    ps = []
    for _ in range(6):
        with gm.memory.category("parameter"):
            p = gm.zeros(1024, 4096, device=device)
        p.requires_grad = True
        with gm.memory.category("gradient"):
            p.grad = gm.full((1024, 4096), 0.01, device=device) if device != "meta" else \
                gm.empty(1024, 4096, device=device)
        ps.append(p)
    return ps


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_adam_step_allocates_exactly_the_state_then_nothing(device):
    ps = _big_params(device)
    param_bytes = sum(p.numel() * 4 for p in ps)
    assert param_bytes == 96 * MiB
    opt = optim.Adam(ps, lr=1e-3, weight_decay=1e-2)  # weight decay: PyTorch's unfused step copies the grad
    mem = gm.memory
    base = mem.memory_allocated(device)
    opt_base = mem.memory_stats(device)["by_category"]["optimizer"]["current"]
    mem.reset_peak_memory_stats(device)
    opt.step()  # first step: creates exp_avg and exp_avg_sq
    state_bytes = 2 * param_bytes
    assert mem.memory_allocated(device) - base == state_bytes
    assert mem.max_memory_allocated(device) - base == state_bytes, "the first step made temporaries"
    assert mem.memory_stats(device)["by_category"]["optimizer"]["current"] - opt_base == state_bytes
    assert all(t._category == "optimizer" for st in opt.state.values() for k, t in st.items() if k != "step")

    before = mem.memory_allocated(device)
    mem.reset_peak_memory_stats(device)
    for _ in range(2):
        opt.step()
    assert mem.max_memory_allocated(device) - before < 1 * MiB
    assert mem.memory_allocated(device) == before


def test_sgd_and_adamw_steps_allocate_nothing():
    pb = Problem(SHAPES)
    for cls, opts in ((optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1)),
                      (optim.AdamW, dict(lr=0.1, amsgrad=True, maximize=True))):
        ps = pb.params()
        opt = cls(ps, **opts)
        pb.backward(ps)
        opt.step()
        before = gm.memory.memory_allocated()
        gm.memory.reset_peak_memory_stats()
        opt.step()
        assert gm.memory.max_memory_allocated() == before, f"{cls.__name__}.step allocated"


def test_out_of_memory_in_the_first_step_names_the_optimizer():
    """Rehearsed on meta: the state does not fit; the error says it was optimizer state, in Adam.step."""
    p = gm.zeros(1024, 4096, device="meta", requires_grad=True)
    p.grad = gm.empty(1024, 4096, device="meta")
    opt = optim.Adam([p])
    gm.memory.empty_cache("meta")  # earlier tests' cached blocks would serve the state
    gm.memory.set_limit("meta", gm.memory.memory_reserved("meta") + 20 * MiB)  # room for exp_avg only
    try:
        with pytest.raises(gm.OutOfMemoryError, match=r"16.00 MiB \(optimizer in Adam.step\)"):
            opt.step()
    finally:
        gm.memory.set_limit("meta", None)
    opt.step()  # with room again, the step completes the state it had started
    assert opt.state[p]["step"] == 1 and set(opt.state[p]) == {"step", "exp_avg", "exp_avg_sq"}


def test_state_is_named_after_the_parameter():
    p = gm.tensor([1.0, 2.0], requires_grad=True)
    p._name = "fc1.weight"
    p.grad = gm.tensor([1.0, 1.0])
    opt = optim.Adam([p])
    opt.step()
    assert opt.state[p]["exp_avg"]._name == "exp_avg(fc1.weight)"


# ---- state_dict ---------------------------------------------------------------------------------------------------
def _trained(cls, opts, steps=3):
    pb = Problem(SHAPES)
    ps = pb.params()
    opt = cls([dict(params=[ps[i] for i in idx], **o) for idx, o in zip(GROUPS, opts)])
    for _ in range(steps):
        opt.zero_grad()
        pb.backward(ps)
        opt.step()
    return pb, ps, opt


def test_state_dict_format_is_pytorchs():
    _, ps, opt = _trained(optim.Adam, [dict(lr=0.1, amsgrad=True), dict(lr=0.2)])
    sd = opt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [[0, 1], [2]]
    assert sd["param_groups"][0]["lr"] == 0.1 and sd["param_groups"][1]["betas"] == (0.9, 0.999)
    assert sorted(sd["state"]) == [0, 1, 2]
    assert sd["state"][0]["step"] == 3
    assert set(sd["state"][0]) == {"step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"}
    assert set(sd["state"][2]) == {"step", "exp_avg", "exp_avg_sq"}
    assert sd["state"][1]["exp_avg"] is opt.state[ps[1]]["exp_avg"]  # referenced, not copied (as PyTorch)


def _continue(pb, ps, opt, steps=2):
    for _ in range(steps):
        opt.zero_grad()
        pb.backward(ps)
        opt.step()
    return [to_numpy(p) for p in ps]


@pytest.mark.parametrize("via_file", [False, True], ids=["direct", "gm.save"])
@pytest.mark.parametrize("cls,opts", [
    (optim.Adam, [dict(lr=0.1, amsgrad=True), dict(lr=0.2, weight_decay=0.1)]),
    (optim.AdamW, [dict(lr=0.1), dict(lr=0.05, maximize=True)]),
    (optim.SGD, [dict(lr=0.1, momentum=0.9), dict(lr=0.1, momentum=0.5, nesterov=True)]),
], ids=["Adam", "AdamW", "SGD"])
def test_state_dict_round_trip(cls, opts, via_file, tmp_path):
    pb, ps, opt = _trained(cls, opts)
    sd = opt.state_dict()
    if via_file:
        gm_save({"optimizer": sd, "params": [p.detach() for p in ps]}, tmp_path / "ckpt.safetensors")
        ck = gm_load(tmp_path / "ckpt.safetensors")
        sd2, saved_params = ck["optimizer"], ck["params"]
    else:
        sd2, saved_params = sd, [p.detach().clone() for p in ps]
    # A fresh optimizer over fresh parameters with the same values and different hyperparameters: everything
    # must come from the state_dict.
    ps2 = [gm.tensor(to_numpy(t), requires_grad=True) for t in saved_params]
    opt2 = cls([dict(params=[ps2[i] for i in idx], lr=123.0) for idx in GROUPS])
    opt2.load_state_dict(sd2)
    assert [g["lr"] for g in opt2.param_groups] == [g["lr"] for g in opt.param_groups]
    for p, p2 in zip(ps, ps2):
        for k, v in opt.state[p].items():
            v2 = opt2.state[p2][k]
            if k == "step":
                assert v2 == v
            else:
                assert v2 is not v, "loaded state aliases the state_dict's tensor"
                assert_close(to_numpy(v2), to_numpy(v), 0, 0, what=f"state {k}")
    a = _continue(pb, ps, opt)
    b = _continue(pb, ps2, opt2)
    for k, (x, y) in enumerate(zip(a, b)):
        assert_close(y, x, 0, 0, what=f"param {k} after resuming")


def test_load_state_dict_reuses_existing_state_tensors():
    _, ps, opt = _trained(optim.Adam, [dict(lr=0.1), dict(lr=0.1)])
    sd = {"state": {k: {kk: (vv.clone() if isinstance(vv, gm.Tensor) else vv) for kk, vv in v.items()}
                    for k, v in opt.state_dict()["state"].items()},
          "param_groups": opt.state_dict()["param_groups"]}
    mine = {id(t) for st in opt.state.values() for k, t in st.items() if k != "step"}
    before = gm.memory.memory_allocated()
    gm.memory.reset_peak_memory_stats()
    opt.load_state_dict(sd)
    assert gm.memory.max_memory_allocated() == before, "loading into existing state allocated"
    assert {id(t) for st in opt.state.values() for k, t in st.items() if k != "step"} == mine


def test_load_state_dict_errors_leave_the_optimizer_unchanged():
    _, ps, opt = _trained(optim.Adam, [dict(lr=0.1), dict(lr=0.2)])
    sd = opt.state_dict()
    snapshot = (opt.state_dict()["param_groups"], {k: dict(v) for k, v in opt.state_dict()["state"].items()})
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": sd["state"], "param_groups": sd["param_groups"][:1]})
    bad_groups = [dict(sd["param_groups"][0], params=[0]), sd["param_groups"][1]]
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict({"state": sd["state"], "param_groups": bad_groups})
    bad_state = dict(sd["state"])
    bad_state[2] = dict(sd["state"][2], exp_avg=gm.zeros(7, dtype=gm.float64))
    with pytest.raises(ValueError, match=r"exp_avg.*parameter 2.*\(7,\).*\(2, 3, 2\)"):
        opt.load_state_dict({"state": bad_state, "param_groups": sd["param_groups"]})
    with pytest.raises(ValueError, match="'state' and 'param_groups'"):
        opt.load_state_dict({"param_groups": []})
    assert opt.state_dict()["param_groups"] == snapshot[0]
    assert {k: dict(v) for k, v in opt.state_dict()["state"].items()}.keys() == snapshot[1].keys()


# ---- the no-learning warning (seed 000) ------------------------------------------------------------------------------
def _tiny_model():
    w = gm.tensor(_rng.standard_normal((4, 3)), dtype=gm.float32, requires_grad=True)
    b = gm.zeros(3, requires_grad=True)
    x = gm.tensor(_rng.standard_normal((2, 4)), dtype=gm.float32)
    y = gm.tensor(_rng.standard_normal((2, 3)), dtype=gm.float32)
    return w, b, x, y


def test_no_gradient_warning_for_seed_000s_mistake():
    w, b, x, y = _tiny_model()
    opt = optim.Adam([w, b], lr=1e-3)
    w0 = to_numpy(w)
    with pytest.warns(optim.NoGradientWarning, match=r"not learning.*no_grad.*fresh leaf") as rec:
        for _ in range(3):
            opt.zero_grad()
            with gm.no_grad():  # the "fix" of seed 000: the forward runs without a graph ...
                loss = ((x @ w + b - y) ** 2).mean()
            loss = gm.tensor(loss, requires_grad=True)  # ... and the loss is re-wrapped as a fresh leaf
            loss.backward()  # succeeds, but reaches only the new leaf
            opt.step()
    assert len([r for r in rec if issubclass(r.category, optim.NoGradientWarning)]) == 1, "warn once"
    assert issubclass(optim.NoGradientWarning, RuntimeWarning)
    assert_close(to_numpy(w), w0, 0, 0, what="nothing learned")


def test_no_warning_for_a_correct_loop():
    w, b, x, y = _tiny_model()
    opt = optim.Adam([w, b], lr=1e-2)
    losses = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(5):
            opt.zero_grad()
            loss = ((x @ w + b - y) ** 2).mean()
            loss.backward()
            opt.step()
            losses.append(loss.item())  # (float(loss) warns, as PyTorch, loss requiring grad)
    assert losses[-1] < losses[0]


def test_no_gradient_warning_for_frozen_parameters():
    p = gm.zeros(3)
    opt = optim.SGD([p], lr=0.1)
    with pytest.warns(optim.NoGradientWarning, match="requires grad"):
        opt.step()


# ---- argument errors ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls,kwargs,match", [
    (optim.SGD, dict(lr=-0.1), "lr"),
    (optim.SGD, dict(lr=0.1, momentum=-0.5), "momentum"),
    (optim.SGD, dict(lr=0.1, weight_decay=-1), "weight_decay"),
    (optim.SGD, dict(lr=0.1, nesterov=True), "nesterov"),
    (optim.SGD, dict(lr=0.1, momentum=0.9, dampening=0.1, nesterov=True), "nesterov"),
    (optim.Adam, dict(lr=-1e-3), "lr"),
    (optim.Adam, dict(betas=(1.0, 0.999)), r"betas\[0\]"),
    (optim.Adam, dict(betas=(0.9, -0.1)), r"betas\[1\]"),
    (optim.Adam, dict(betas=0.9), "betas"),
    (optim.Adam, dict(eps=-1e-8), "eps"),
    (optim.AdamW, dict(weight_decay=-0.01), "weight_decay"),
])
def test_invalid_hyperparameters(cls, kwargs, match):
    p = gm.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match=match):
        cls([p], **kwargs)
    with pytest.raises(ValueError, match=match):  # per-group options are checked too
        cls([{"params": [p], **kwargs}])


def test_invalid_params():
    p = gm.zeros(2, requires_grad=True)
    with pytest.raises(TypeError, match="iterable of Tensors or dicts.*single Tensor"):
        optim.SGD(p, lr=0.1)
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        optim.SGD([p, 3.0], lr=0.1)
    with pytest.raises(TypeError, match="set"):
        optim.SGD({p}, lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="floating point"):
        optim.SGD([gm.zeros(2, dtype=gm.int64)], lr=0.1)
    q = gm.zeros(2, requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [q, p]})
    opt.add_param_group({"params": q, "lr": 0.5})  # a single tensor is fine inside a group dict
    assert opt.param_groups[1]["lr"] == 0.5 and opt.param_groups[1]["momentum"] == 0.0
    with pytest.warns(UserWarning, match="duplicate"):
        optim.SGD([p, p], lr=0.1)


def test_c_entry_points_validate():
    p = gm.zeros(2, 3, dtype=gm.float64)
    g = gm.zeros(2, 3, dtype=gm.float64)
    m, v = gm.zeros(2, 3, dtype=gm.float64), gm.zeros(2, 3, dtype=gm.float64)
    args = dict(lr=0.1, beta1=0.9, beta2=0.999)
    with pytest.raises(ValueError, match=r"grads\[0\] has shape \(3, 2\) but params\[0\] has shape \(2, 3\)"):
        _C.adam_step_([p], [g.T], [m], [v], None, [1], **args)
    with pytest.raises(TypeError, match=r"exp_avgs\[0\] has dtype float32.*float64"):
        _C.adam_step_([p], [g], [gm.zeros(2, 3)], [v], None, [1], **args)
    with pytest.raises(ValueError, match=r"steps\[0\] must be >= 1"):
        _C.adam_step_([p], [g], [m], [v], None, [0], **args)
    with pytest.raises(ValueError, match="exp_avg_sqs has 2 entries but params has 1"):
        _C.adam_step_([p], [g], [m], [v, v], None, [1], **args)
    with pytest.raises(ValueError, match="share memory"):
        _C.adam_step_([p], [g], [m], [m], None, [1], **args)
    with pytest.raises(ValueError, match="amsgrad needs max_exp_avg_sqs"):
        _C.adam_step_([p], [g], [m], [v], None, [1], amsgrad=True, **args)
    with pytest.raises(ValueError, match=r"beta2 must be in \[0, 1\), got 1.5"):
        _C.adam_step_([p], [g], [m], [v], None, [1], lr=0.1, beta1=0.9, beta2=1.5)
    with pytest.raises(TypeError, match=r"params\[0\] has dtype int64"):
        _C.sgd_step_([gm.zeros(2, dtype=gm.int64)], [gm.zeros(2, dtype=gm.int64)], None, None, 0.1)
    with pytest.raises(ValueError, match="momentum=0.9 needs momentum_buffers"):
        _C.sgd_step_([p], [g], None, None, 0.1, 0.9)
    with pytest.raises(TypeError, match="single Tensor"):
        _C.sgd_step_(p, [g], None, None, 0.1)
    with pytest.raises(RuntimeError, match="on meta but params"):
        _C.sgd_step_([p], [gm.empty(2, 3, dtype=gm.float64, device="meta")], None, None, 0.1)
    _C.adam_step_([], [], [], [], None, [], **args)  # an empty group is a no-op


# ---- lr schedulers ---------------------------------------------------------------------------------------------------
def _sched_opt(lrs=(0.1, 0.01)):
    return optim.SGD([{"params": [gm.zeros(1, requires_grad=True)], "lr": lr} for lr in lrs], lr=1.0)


def _lrs(opt, sched, epochs):
    out = []
    for _ in range(epochs):
        out.append(sched.get_last_lr())
        assert out[-1] == [g["lr"] for g in opt.param_groups]
        sched.step()
    return np.array(out)


def test_step_lr():
    opt = _sched_opt()
    got = _lrs(opt, lr_scheduler.StepLR(opt, step_size=3, gamma=0.5), 10)
    ref = np.array([[base * 0.5 ** (e // 3) for base in (0.1, 0.01)] for e in range(10)])
    assert_close(got, ref, 1e-15, 1e-12, what="StepLR")


def test_cosine_annealing_lr():
    opt = _sched_opt()
    T, eta_min = 5, 0.001
    got = _lrs(opt, lr_scheduler.CosineAnnealingLR(opt, T_max=T, eta_min=eta_min), 2 * T + 4)
    ref = np.array([[eta_min + (base - eta_min) * (1 + math.cos(math.pi * e / T)) / 2 for base in (0.1, 0.01)]
                    for e in range(2 * T + 4)])
    assert_close(got, ref, 1e-12, 1e-9, what="CosineAnnealingLR")


def test_lambda_lr():
    opt = _sched_opt()
    got = _lrs(opt, lr_scheduler.LambdaLR(opt, [lambda e: 0.9 ** e, lambda e: 1.0 / (e + 1)]), 6)
    ref = np.array([[0.1 * 0.9 ** e, 0.01 / (e + 1)] for e in range(6)])
    assert_close(got, ref, 1e-15, 1e-12, what="LambdaLR")
    opt = _sched_opt()
    got = _lrs(opt, lr_scheduler.LambdaLR(opt, lambda e: 0.5 ** e), 4)
    assert_close(got[:, 1], 0.01 * 0.5 ** np.arange(4), 1e-15, 1e-12, what="one lambda for every group")


def test_scheduler_drives_the_step():
    p = gm.zeros(1, dtype=gm.float64, requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        p.grad = gm.ones(1, dtype=gm.float64)
        opt.step()
        sched.step()
    assert to_numpy(p).tolist() == [-(1.0 + 0.5 + 0.25)]


def test_scheduler_state_dict_resumes():
    opt = _sched_opt()
    sched = lr_scheduler.CosineAnnealingLR(opt, T_max=7)
    for _ in range(3):
        sched.step()
    sd = sched.state_dict()
    assert "optimizer" not in sd and sd["last_epoch"] == 3
    opt2 = _sched_opt()
    opt2.load_state_dict(opt.state_dict())
    sched2 = lr_scheduler.CosineAnnealingLR(opt2, T_max=7)
    sched2.load_state_dict(sd)
    for _ in range(3):
        sched.step()
        sched2.step()
        assert sched2.get_last_lr() == sched.get_last_lr()
    lam = lr_scheduler.LambdaLR(_sched_opt(), lambda e: 1.0)
    assert lam.state_dict()["lr_lambdas"] == [None, None]


def test_scheduler_errors():
    opt = _sched_opt()
    with pytest.raises(ValueError, match="step_size"):
        lr_scheduler.StepLR(opt, step_size=0)
    with pytest.raises(ValueError, match="T_max"):
        lr_scheduler.CosineAnnealingLR(opt, T_max=0)
    with pytest.raises(ValueError, match="expected 2 lr_lambdas"):
        lr_scheduler.LambdaLR(opt, [lambda e: 1.0])
    with pytest.raises(TypeError, match="callable"):
        lr_scheduler.LambdaLR(opt, 0.5)
    with pytest.raises(TypeError, match="Optimizer"):
        lr_scheduler.StepLR(object(), step_size=2)
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(_sched_opt(), step_size=2, last_epoch=4)


# ---- PyTorch, where installed ----------------------------------------------------------------------------------------
TORCH_RUNS = [
    ("SGD", SGD_CASES["everything"]),
    ("SGD", SGD_CASES["dampening"]),
    ("Adam", ADAM_CASES["amsgrad"]),
    ("Adam", ADAM_CASES["maximize"]),
    ("Adam", ADAM_CASES["betas_eps"]),
    ("AdamW", [dict(lr=0.1, weight_decay=0.1), dict(lr=0.05, amsgrad=True, maximize=True)]),
]


@pytest.mark.parametrize("name,opts", TORCH_RUNS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(TORCH_RUNS)])
def test_against_torch(name, opts):
    torch = pytest.importorskip("torch")
    pb = Problem(SHAPES)
    got, _ = run_gm(getattr(optim, name), opts, steps=6, problem=pb)
    tp = [torch.tensor(x, requires_grad=True) for x in pb.x0]
    topt = getattr(torch.optim, name)([dict(params=[tp[i] for i in idx], **o) for idx, o in zip(GROUPS, opts)],
                                      foreach=False)
    for _ in range(6):
        topt.zero_grad()
        sum((p * p * torch.tensor(c) * 0.5 + p * torch.tensor(b)).sum() for p, c, b in zip(tp, pb.c, pb.b)).backward()
        topt.step()
    for k, (g, t) in enumerate(zip(got, tp)):
        assert_close(g, t.detach().numpy(), 1e-12, 1e-10, what=f"{name}: param {k} vs torch")


def test_schedulers_against_torch():
    torch = pytest.importorskip("torch")

    def torch_lrs(make, epochs):
        o = torch.optim.SGD([{"params": [torch.zeros(1, requires_grad=True)], "lr": lr} for lr in (0.1, 0.01)])
        s = make(torch.optim.lr_scheduler, o)
        out = []
        for _ in range(epochs):
            out.append(s.get_last_lr())
            o.step()
            s.step()
        return np.array(out)
    for make in (lambda m, o: m.StepLR(o, 3, 0.5), lambda m, o: m.CosineAnnealingLR(o, 5, 0.001),
                 lambda m, o: m.LambdaLR(o, lambda e: 0.9 ** e)):
        opt = _sched_opt()
        assert_close(_lrs(opt, make(lr_scheduler, opt), 14), torch_lrs(make, 14), 1e-15, 1e-12,
                     what="scheduler vs torch")


def test_state_dict_loads_into_torch():
    torch = pytest.importorskip("torch")
    _, ps, opt = _trained(optim.Adam, [dict(lr=0.1, amsgrad=True), dict(lr=0.2)])
    sd = opt.state_dict()
    tsd = {"state": {k: {kk: (torch.tensor(to_numpy(vv)) if isinstance(vv, gm.Tensor) else vv)
                         for kk, vv in v.items()} for k, v in sd["state"].items()},
           "param_groups": sd["param_groups"]}
    tp = [torch.tensor(to_numpy(p), requires_grad=True) for p in ps]
    topt = torch.optim.Adam([dict(params=[tp[i] for i in idx]) for idx in GROUPS])
    topt.load_state_dict(tsd)
    assert float(topt.state_dict()["state"][0]["step"]) == 3.0
