"""Error cases of complex tensors (_core/complex.py), torch.stft (fft.py) and sparse COO tensors (sparse.py): B(...) is run against PyTorch too
(error_inputs.py explains it). EXEMPT: public callables with no bad input, each with its reason
(test_error_coverage.py)."""
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
]
EXEMPT = {}
