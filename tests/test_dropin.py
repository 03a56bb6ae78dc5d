"""PyTorch code on gpumemnet: `python -m gpumemnet run` and `gm.as_torch()` make `import torch` give gpumemnet.

Each case runs in a fresh interpreter (the alias changes the import system of the process that asks for it)."""
import os
import subprocess
import sys
import textwrap

import pytest


def run_script(tmp_path, source, *args, report=False):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(source))
    cmd = [sys.executable, "-m", "gpumemnet", "run"] + (["--report"] if report else []) + [str(script), *args]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=dict(os.environ))


TRAIN = """
    import sys
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset
    import gpumemnet as gm

    def steps(lib, nn_, F_):
        lib.manual_seed(0)
        net = nn_.Sequential(nn_.Conv2d(1, 4, 3), nn_.ReLU(), nn_.Flatten(), nn_.Linear(4 * 6 * 6, 3))
        opt = lib.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        x = lib.randn(8, 1, 8, 8)
        y = lib.tensor([0, 1, 2, 0, 1, 2, 0, 1])
        for _ in range(3):
            opt.zero_grad()
            loss = F_.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
        return [p.detach().numpy().copy() for p in net.parameters()], loss

    ps_torch, loss = steps(torch, nn, F)
    ps_gm, _ = steps(gm, gm.nn, gm.nn.functional)
    assert all(np.array_equal(a, b) for a, b in zip(ps_torch, ps_gm))
    assert isinstance(loss, torch.Tensor) and torch.Tensor is gm.Tensor
    assert torch.nn.functional is not None and F.relu is gm.nn.functional.relu
    print("argv", sys.argv[1:])
    print("version", torch.__version__)
    print("name", __name__)
"""


def test_run_gives_gpumemnet_for_torch(tmp_path):
    r = run_script(tmp_path, TRAIN, "--epochs", "2", "x")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert "argv ['--epochs', '2', 'x']" in out      # the script's own arguments, not run's
    assert "name __main__" in out                      # `if __name__ == "__main__":` scripts run
    import gpumemnet as gm
    assert f"version 2.15.0+gpumemnet.{gm.__version__}" in out


def test_missing_name_says_what_it_is_and_report_lists_it(tmp_path):
    r = run_script(tmp_path, """
        import torch
        assert getattr(torch, "no_such_name_for_the_report", None) is None   # a probe the script handles
        try:
            import torch.no_such_module
        except ModuleNotFoundError as e:
            print("module:", e)
        torch.nn.NoSuchLayer(3)
    """, report=True)
    assert r.returncode == 1
    assert ("module: torch.no_such_module is a PyTorch name gpumemnet does not have yet "
            "(running PyTorch code on gpumemnet)") in r.stdout
    assert ("AttributeError: torch.nn.NoSuchLayer is a PyTorch name gpumemnet does not have yet "
            "(running PyTorch code on gpumemnet)") in r.stderr
    report = r.stderr[r.stderr.index("gpumemnet run: "):].splitlines()
    assert report[:4] == ["gpumemnet run: 3 PyTorch name(s) looked up that gpumemnet does not have yet:",
                          "  torch.nn.NoSuchLayer", "  torch.no_such_module", "  torch.no_such_name_for_the_report"]


def test_no_report_without_the_flag(tmp_path):
    r = run_script(tmp_path, "import torch\nprint(getattr(torch, 'no_such_name', 1))\n")
    assert r.returncode == 0 and r.stdout == "1\n" and "gpumemnet run:" not in r.stderr


def test_flags_set_through_the_alias_reach_gpumemnet(tmp_path):
    r = run_script(tmp_path, """
        import torch, gpumemnet as gm
        torch.backends.cuda.matmul.allow_tf32 = True
        assert gm.backends.cuda.matmul.allow_tf32 is True
        import torch.nn.functional
        torch.nn.functional.my_flag = 7            # a module attribute written through the alias
        assert gm.nn.functional.my_flag == 7
        assert "Conv2d" in dir(torch.nn)
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_alias_modules_list_their_classes_and_functions(tmp_path):
    """vars() / inspect.getmembers of an alias module see its public classes and functions (PyG's activation
    resolver: vars(torch.nn.modules.activation)); a module re-exported under another name is that module's alias;
    a function replaced through the alias is replaced for every reader."""
    r = run_script(tmp_path, """
        import inspect, torch, torch.nn.modules.activation as act, gpumemnet as gm
        names = {k for k, v in vars(act).items() if isinstance(v, type) and issubclass(v, torch.nn.Module)}
        assert {"ReLU", "GELU", "SELU", "Softsign", "MultiheadAttention"} <= names, names
        assert "Linear" in vars(torch.nn) and "SGD" in vars(torch.optim) and "relu" in vars(torch.nn.functional)
        assert act.F is torch.nn.functional and len(inspect.getmembers(act, inspect.isclass)) > 25
        old = torch.nn.functional.gelu
        torch.nn.functional.gelu = lambda x, approximate="none": x * 0
        assert torch.nn.GELU()(torch.ones(2)).tolist() == [0.0, 0.0] and gm.nn.functional.gelu is not old
        torch.nn.functional.gelu = old
        from torch.distributions.constraints import __all__ as names  # pyro reads them; dunders otherwise refused
        assert "positive" in names and "Adam" in torch.optim.__all__ and isinstance(torch.__config__.show(), str)
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_script_errors_and_exit_codes_pass_through(tmp_path):
    r = run_script(tmp_path, "import sys\nsys.exit(3)\n")
    assert r.returncode == 3
    r = run_script(tmp_path, "raise ValueError('from the script')\n")
    assert r.returncode == 1 and "ValueError: from the script" in r.stderr


def test_as_torch_in_process():
    code = textwrap.dedent("""
        import sys, types
        import gpumemnet as gm
        torch = gm.as_torch()
        import torch as t2
        assert torch is t2 and torch is gm.as_torch()         # idempotent
        import torch.optim.lr_scheduler as s
        assert s.StepLR is gm.optim.lr_scheduler.StepLR
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_as_torch_refuses_after_a_real_torch():
    code = textwrap.dedent("""
        import sys, types
        sys.modules["torch"] = types.ModuleType("torch")   # stands for a PyTorch imported earlier
        import gpumemnet as gm
        try:
            gm.as_torch()
        except RuntimeError as e:
            print(e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "PyTorch is already imported in this process" in r.stdout


@pytest.mark.parametrize("argv", [["frobnicate"], ["run"]])
def test_cli_usage_errors(argv):
    r = subprocess.run([sys.executable, "-m", "gpumemnet", *argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 if argv == ["run"] else r.returncode == 1
    assert ("the following arguments are required: script" in r.stderr if argv == ["run"]
            else "unknown command 'frobnicate'" in r.stderr)


def test_pytorch_infrastructure_modules_behave_as_where_the_feature_is_off(tmp_path):
    r = run_script(tmp_path, """
        import os
        import torch, torch.jit, torch.hub, torch.ops, torch.library, torch.fx, torch.compiler, torch._C
        from torch.utils.data import Dataset, DataLoader
        import gpumemnet as gm

        def f(x):
            return x + 1
        assert not torch.jit.is_scripting() and not torch.jit.is_tracing()
        assert torch.jit.unused(f) is f and torch.jit.script(f) is f and torch.jit.ignore(drop=True)(f) is f
        assert torch.jit.annotate(list, [1]) == [1]
        assert torch.fx.wrap(f) is f and torch.fx.wrap("name") == "name"
        assert not torch.compiler.is_compiling() and torch.compiler.disable(f) is f
        try:
            torch.ops.load_library("/nowhere/libops.so")
        except OSError as e:
            assert "/nowhere/libops.so" in str(e)
        else:
            raise AssertionError("load_library loaded")
        try:
            torch.ops.torchvision.nms
        except AttributeError as e:
            assert "torch.ops.torchvision.nms" in str(e)
        assert torch.library.register_fake("ns::op")(f) is f and torch.library.register_fake("ns::op", f) is f
        assert torch.library.Library("ns", "DEF").define("op(Tensor x) -> Tensor") == "op"
        os.environ["TORCH_HOME"] = "/some/home"
        assert torch.hub._get_torch_home() == "/some/home" and torch.hub.get_dir() == "/some/home/hub"
        try:
            torch.hub.load_state_dict_from_url("https://example.invalid/w.pth")
        except NotImplementedError as e:
            assert "gm.load" in str(e)
        torch._C._log_api_usage_once("x")
        assert torch._C._get_tracing_state() is None
        keys = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU) | torch._C.DispatchKeySet("B")
        assert keys.keys == {"AutocastCPU", "B"}
        with torch._C._ExcludeDispatchKeyGuard(keys):
            pass
        assert torch.version.cuda == gm._C._build_info()["cuda"]
        class Named(Dataset[int]):       # typing-style base classes, as torchvision's datasets write them
            pass
        assert issubclass(Named, Dataset) and DataLoader[int] is DataLoader
        print("ok")
    """)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr
