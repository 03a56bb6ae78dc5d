"""Error cases of complex tensors (_core/complex.py), torch.stft (fft.py) and sparse COO tensors (sparse.py), and of
the other names the same work added: B(...) is run against PyTorch too (error_inputs.py explains it). EXEMPT:
public callables with no bad input, each with its reason (test_error_coverage.py)."""
from error_inputs import B, z
from error_inputs_api import E

CASES = [
    B("view_as_complex of a last dimension of 3", lambda d, l: l.L.view_as_complex(z(d, l, 4, 3)), RuntimeError,
      r"Tensor must have a last dimension of size 2"),
    B("view_as_complex of an integer tensor", lambda d, l: l.L.view_as_complex(z(d, l, 4, 2, dtype="int64")),
      NotImplementedError, r"view_as_complex is only supported for half, float and double tensors"),
    B("view_as_real of a real tensor", lambda d, l: l.L.view_as_real(z(d, l, 4, 2)), TypeError,
      r"view_as_real is only supported for complex tensors"),
    B("polar of a number", lambda d, l: l.L.polar(1.0, z(d, l, 3)), TypeError,
      r"polar\(\): argument 'abs'.*must be Tensor, not float"),
    B("complex of int64 parts", lambda d, l: l.L.complex(z(d, l, 3, dtype="int64"), z(d, l, 3, dtype="int64")),
      NotImplementedError, r"(?i)expected both inputs to be Half, Float or Double tensors"),
    B("imag of a real tensor", lambda d, l: l.L.imag(z(d, l, 3)), TypeError,
      r"imag is not implemented for tensors with non-complex dtypes"),
    B("real of a list", lambda d, l: l.L.real([1.0]), TypeError, r"real\(\): argument 'input'.*must be Tensor"),
    B("angle of a number", lambda d, l: l.L.angle(2.0), TypeError, r"angle\(\): argument 'input'.*must be Tensor"),
    B("conj of a number", lambda d, l: l.L.conj(2.0), TypeError, r"conj\(\): argument 'input'.*must be Tensor"),
    B("istft of a real tensor", lambda d, l: l.L.istft(z(d, l, 9, 5), 16), TypeError,
      r"istft requires a complex-valued input tensor"),
    B("stft without return_complex", lambda d, l: l.L.stft(z(d, l, 64), 16), RuntimeError,
      r"stft requires the return_complex parameter be given for real inputs"),
]
CASES += [
    # PyTorch checks no index against the size unless asked (check_invariants=True); gpumemnet always does
    E("sparse_coo_tensor index beyond the size", lambda d, l: l.L.sparse_coo_tensor(
      l.L.tensor([[0, 3]], device=d), l.L.ones(2, device=d), (3,)), RuntimeError,
      r"size is inconsistent with indices: for dim 0, size is 3 but found index 3", devices=("cpu", "cuda")),
    B("spmm of mismatched shapes", lambda d, l: l.L.spmm(l.L.sparse_coo_tensor(
      l.L.tensor([[0, 1], [1, 0]], device=d), l.L.ones(2, device=d), (2, 2)), z(d, l, 3, 2)), RuntimeError,
      r"(cannot be multiplied|Expected dim 0 size 2, got 3)", devices=("cpu",)),
    B("Tensor.to_sparse with sparse_dim out of range", lambda d, l: z(d, l, 2, 2).to_sparse(3), RuntimeError,
      r"sparse_dim argument must be in \[0,2\] range, but 3 is given", devices=("cpu",)),
    B("sparse + dense", lambda d, l: l.L.sparse_coo_tensor(l.L.tensor([[0], [0]], device=d), l.L.ones(1, device=d),
      (2, 2)) + z(d, l, 2, 2), RuntimeError, r"add\(sparse, dense\) is not supported", devices=("cpu",)),
]
# the other names this work added (tests/test_torch_forms.py, tests/test_training_idioms.py)
CASES += [
    B("frexp of an integer tensor", lambda d, l: l.L.frexp(l.L.tensor([1, 2], device=d)), RuntimeError,
      r"frexp\(\) only supports floating-point dtypes", devices=("cpu",)),
    B("Tensor.frexp of an integer tensor", lambda d, l: l.L.tensor([1, 2], device=d).frexp(), RuntimeError,
      r"frexp\(\) only supports floating-point dtypes", devices=("cpu",)),
    B("poisson of a negative rate", lambda d, l: l.L.poisson(l.L.tensor([-1.0], device=d)), RuntimeError,
      r"expected rate to be non-negative", devices=("cpu",)),
    B("set_default_tensor_type of an integer type", lambda d, l: l.L.set_default_tensor_type(l.L.LongTensor),
      TypeError, r"only floating-point types are supported as the default type", devices=("cpu",)),
    E("vmap of a non-callable", lambda d, l: l.L.vmap(3), TypeError, r"vmap: func must be callable, got int",
      devices=("cpu",)),
    B("vmap with more in_dims than arguments", lambda d, l: l.L.vmap(lambda x: x, in_dims=(0, 0))(z(d, l, 2)),
      ValueError, r"in_dims", devices=("cpu",)),
    B("SparseAdam with a negative learning rate", lambda d, l: l.L.optim.SparseAdam(
      [l.L.ones(1, requires_grad=True)], lr=-1), ValueError, r"Invalid learning rate: -1", devices=("cpu",)),
    B("Tensor.stft without return_complex", lambda d, l: z(d, l, 64).stft(16), RuntimeError,
      r"stft requires the return_complex parameter", devices=("cpu",)),
]
EXEMPT = {"Tensor.share_memory_": "no bad input: any CPU tensor moves into shared memory (meta refuses, as PyTorch)",
          "Tensor.is_shared": "a query with no argument",
          "Tensor.to_dense": "a dense tensor's is itself (or its cast to dtype=, whose errors are Tensor.to's)",
          "Tensor.to_sparse_coo": "no argument: Tensor.to_sparse's case covers the conversion"}
