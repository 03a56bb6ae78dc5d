"""What PyTorch-ecosystem libraries import at load time (round 21's sweep of 125 packages): the same script, made of
their import lines and a use of each name, run under PyTorch (`python script.py`) and under the alias (`python -m
gpumemnet run script.py`) prints the same lines. Each line names the library that needs it."""
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

SCRIPT = r'''
import warnings
import numpy as np
import torch

def show(tag, f):
    try:
        print(tag, f())
    except Exception as e:  # the type is what is compared
        print(tag, "raised", "RuntimeError" if isinstance(e, RuntimeError) else type(e).__name__)

aten = torch.ops.aten  # PyG keys its dispatch tables on these overloads at import
show("aten repr", lambda: [repr(getattr(getattr(aten, o), v)) for o, v in (("_to_copy", "default"),
     ("cat", "default"), ("index", "Tensor"), ("slice", "Tensor"), ("select", "int"), ("add", "Tensor"),
     ("sort", "stable"), ("alias", "default"), ("_pin_memory", "default"))])
show("aten eq", lambda: (aten.add.Tensor == aten.add.Tensor, aten.sort.stable == aten.sort.default,
                         len({aten.add.Tensor, aten.add.Tensor, aten.add.Scalar})))
x = torch.arange(12.0).reshape(3, 4)
show("aten calls", lambda: [aten._to_copy.default(x, dtype=torch.float64).dtype == torch.float64,
     aten.cat.default([x, x]).shape[0], aten.slice.Tensor(x, 1, 1, 3).tolist(),
     aten.index.Tensor(x, [torch.tensor([2, 0])]).tolist(), aten.alias.default(x).shape == x.shape])
from torch._C._functorch import is_batchedtensor  # tensordict
show("functorch", lambda: (is_batchedtensor(x), torch._C._functorch.is_batchedtensor(x)))
def symbolic(g: torch._C.Graph, v):  # transformers' sew_d
    return v
from torch.utils.data._utils.pin_memory import pin_memory  # speechbrain
show("pin_memory", lambda: (pin_memory("text"), pin_memory(3), pin_memory({"a": "b"})))
from torch.utils.data._utils.worker import _generate_state  # tensordict
show("generate_state", lambda: [_generate_state(s, w)
                                for s, w in ((0, 0), (5, 1), (2 ** 63 - 1, 7), (12345678901234, 3))])
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode  # transformers.exporters
show("guard", lambda: issubclass(GuardOnDataDependentSymNode, RuntimeError))
@torch.jit.script_if_tracing  # transformers' vitdet
def twice(v):
    return v * 2
show("script_if_tracing", lambda: twice(torch.ones(2)).tolist())
show("export", lambda: torch.export.ExportedProgram.__name__)  # transformers' executorch integration
from torch.nested import nested_tensor  # vit-pytorch's NaViT
from torch.fx import GraphModule, Node, Proxy  # optimum.fx
from torch._ops import HigherOrderOperator  # spikingjelly
show("hop", lambda: issubclass(type("MyOp", (HigherOrderOperator,), {}), HigherOrderOperator))
from torch.autograd.graph import register_multi_grad_hook  # spikingjelly's op counter
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper  # spikingjelly
r = np.random.default_rng(0)
lin = torch.nn.Linear(3, 2).double()
with torch.no_grad():
    for p in lin.parameters():
        p.copy_(torch.tensor(r.standard_normal(tuple(p.shape))))
wrapped = checkpoint_wrapper(lin)
xin = torch.tensor(r.standard_normal((4, 3)), requires_grad=True)
wrapped(xin).pow(2).sum().backward()
show("checkpoint_wrapper", lambda: (sorted(wrapped.state_dict()), wrapped.in_features,
                                     round(xin.grad.sum().item(), 12), str(wrapped.load_state_dict(lin.state_dict()))))
from torch.jit import TracerWarning, _get_trace_graph  # mmengine.analysis
from torch._dynamo.utils import warn_once  # torchao
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    warn_once("once, please")
    warn_once("once, please")
show("warn_once", lambda: [str(w.message) for w in seen])
from torch.fx.immutable_collections import immutable_dict, immutable_list  # lightning-thunder
show("immutable", lambda: (immutable_list([1, 2]), dict(immutable_dict({"a": 1})),
                          hash(immutable_list([1])) == hash((1,))))
show("immutable append", lambda: immutable_list([1]).append(2))
from torch.utils.weak import WeakIdKeyDictionary  # tensordict
d, t = WeakIdKeyDictionary(), torch.ones(2)
d[t] = "value"
show("weak", lambda: (d[t], t in d, torch.ones(2) in d, len(d)))
del t
import gc; gc.collect()
show("weak after", lambda: len(d))
from torch.utils._contextlib import _DecoratorContextManager  # tensordict
class Flag(_DecoratorContextManager):
    on = False
    def __enter__(self):
        self.prev, Flag.on = Flag.on, True
    def __exit__(self, *exc):
        Flag.on = self.prev
@Flag()
def inside():
    return Flag.on
@Flag()
def steps():
    yield Flag.on
    yield Flag.on
show("decorator", lambda: (inside(), list(steps()), Flag.on))
from torch.nn.parameter import UninitializedTensorMixin  # tensordict
show("uninitialized", lambda: (isinstance(torch.nn.parameter.UninitializedParameter(), UninitializedTensorMixin),
                               isinstance(torch.ones(1), UninitializedTensorMixin)))
show("qint", lambda: [str(d) for d in (torch.qint8, torch.quint8, torch.qint32, torch.quint4x2, torch.quint2x4)])
from torch.torch_version import TorchVersion  # tabpfn
show("version", lambda: (torch.__version__ >= TorchVersion("2.0"), torch.__version__ >= (2, 1),
                         isinstance(torch.__version__, TorchVersion), TorchVersion("2.10.1") > "2.9"))
import torch.nn.grad as conv_grad  # bindsnet's learning rules
xg, wg = torch.arange(32.0).reshape(1, 2, 4, 4), torch.arange(36.0).reshape(2, 2, 3, 3) / 10
go = torch.arange(8.0).reshape(1, 2, 2, 2)
show("nn.grad", lambda: (conv_grad.conv2d_weight(xg, wg.shape, go).flatten().tolist(),
                         conv_grad.conv2d_input(xg.shape, wg, go).flatten().tolist(),
                         conv_grad.conv1d_input((1, 2, 4), wg[:, :, 0], go[:, :, 0]).flatten().tolist()))
show("DataLoader doc", lambda: isinstance(torch.utils.data.DataLoader.__doc__, str))  # torchtuples
from torch.optim.lr_scheduler import _enable_get_lr_call  # nnU-Net
sch = torch.optim.lr_scheduler.StepLR(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1), 1)
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    with _enable_get_lr_call(sch):
        lrs = sch.get_lr()
show("enable_get_lr_call", lambda: (lrs, len(seen)))
from torch.autograd.graph import get_gradient_edge  # torchjd
xe = torch.ones(2, requires_grad=True)
ye = (xe * 3).sum()
show("gradient edge", lambda: (type(get_gradient_edge(ye)).__name__, get_gradient_edge(ye).output_nr,
                               get_gradient_edge(ye).node is ye.grad_fn))
from torch import quantization  # catalyst
show("quantization", lambda: quantization.quantize_dynamic.__name__)
show("serialization.pickle", lambda: torch.serialization.pickle.__name__)  # torchbearer
from torchvision.models.feature_extraction import create_feature_extractor  # monai-generative
from torch._dynamo.exc import TorchDynamoException  # heavyball
from torch._inductor.utils import triton_type_to_torch  # torch-optimi
show("ScriptMethod", lambda: isinstance(len, torch._C.ScriptMethod))  # torchview
show("parse_to", lambda: [str(v).split(".")[-1] for v in torch._C._nn._parse_to("cpu", torch.float64)])  # Lightning
# tensorboardX's make_np ('torch' in str(type(x))) and wandb's typename checks (module.qualname of the class)
show("tensor type", lambda: (str(type(x)), torch.Tensor.__module__, torch.nn.Parameter.__module__,
                             "torch" in str(type(torch.nn.Parameter(torch.ones(1))))))
from torch.utils._pytree import SUPPORTED_NODES, _get_node_type  # Lightning 2.6's apply_to_collection
show("pytree nodes", lambda: SUPPORTED_NODES[_get_node_type([x])].flatten_fn([1, 2])[0])
'''


def _run(tmp_path, cmd):
    script = tmp_path / "imports.py"
    script.write_text(textwrap.dedent(SCRIPT))
    out = subprocess.run(cmd + [str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.splitlines()


def test_library_imports_behave_as_under_pytorch(tmp_path):
    ref = _run(tmp_path, [sys.executable])
    got = _run(tmp_path, [sys.executable, "-m", "gpumemnet", "run", "--no-estimate"])
    assert len(got) == len(ref)
    for r, g in zip(ref, got):
        assert g == r
