"""The PyTorch infrastructure names that real code touches at import (torchvision's first import among them) under
the alias: compiler, exporter and quantization probes get PyTorch's answers for a machine where the feature is
off, and the few layers gpumemnet does not compute yet exist for imports but refuse to run, saying so, and are
listed by `run --report`. Each case runs in a fresh interpreter (the alias changes the import system)."""
from test_dropin import run_script


def test_probes_answer_as_where_the_feature_is_off(tmp_path):
    r = run_script(tmp_path, """
        import torch
        import torch._custom_ops
        import torch._dynamo
        from torch._dynamo.utils import is_compile_supported
        from torch.jit.annotations import BroadcastingList2
        from torch.onnx.symbolic_helper import parse_args
        from torch.onnx import symbolic_opset11, operators
        from torch.nn.modules.utils import _pair, _triple, _ntuple, consume_prefix_in_state_dict_if_present
        assert torch._dynamo.is_compiling() is False and is_compile_supported("cuda") is False
        assert torch.onnx.is_in_onnx_export() is False
        assert torch._dynamo.disable(len) is len and torch._dynamo.allow_in_graph(abs) is abs
        assert BroadcastingList2[int] == list[int] or BroadcastingList2[int] is not None
        assert parse_args("v", "i")(len) is len
        assert _pair(3) == (3, 3) and _pair((1, 2)) == (1, 2) and _triple(1) == (1, 1, 1) and _ntuple(4)(0) == (0,) * 4
        sd = {"module.w": 1, "module.b": 2, "x": 3}
        consume_prefix_in_state_dict_if_present(sd, "module.")
        assert sd == {"w": 1, "b": 2, "x": 3}
        try:
            torch._custom_ops.get_ctx()
        except RuntimeError as e:
            assert "fake" in str(e)
        else:
            raise AssertionError("get_ctx ran")
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_quant_stubs_are_identities_and_preparing_refuses(tmp_path):
    r = run_script(tmp_path, """
        import torch
        from torch.ao.quantization import DeQuantStub, QuantStub
        net = torch.nn.Sequential(QuantStub(), torch.nn.Linear(3, 2), DeQuantStub())
        x = torch.randn(4, 3)
        assert (net(x) - net[1](x)).abs().max().item() == 0
        try:
            torch.ao.quantization.prepare(net)
        except NotImplementedError as e:
            print(e)
    """, report=True)
    assert r.returncode == 0, r.stderr
    assert "torch.ao.quantization.prepare is a PyTorch name gpumemnet does not have yet" in r.stdout
    assert "torch.ao.quantization.prepare" in r.stderr  # --report lists it


def test_names_not_computed_yet_import_but_refuse_to_run(tmp_path):
    """torchvision's video models subclass nn.Conv3d at import, and it runs; a stand-in (_core/unsupported.py, here
    torch.ao.quantization's prepare) imports, refuses to run, and --report names it."""
    r = run_script(tmp_path, """
        import torch
        import torch.nn as nn
        from torch.ao.quantization import prepare

        class Conv3DSimple(nn.Conv3d):
            pass

        print(tuple(Conv3DSimple(3, 8, 3, padding=1)(torch.randn(1, 3, 4, 5, 5)).shape))
        try:
            prepare(nn.Linear(2, 2))
        except NotImplementedError as e:
            print(e)
        else:
            raise AssertionError("ran")
    """, report=True)
    assert r.returncode == 0, r.stderr
    assert "(1, 8, 4, 5, 5)" in r.stdout
    assert "torch.ao.quantization.prepare is a PyTorch name gpumemnet does not have yet" in r.stdout
    assert "torch.ao.quantization.prepare" in r.stderr
