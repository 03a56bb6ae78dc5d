"""Layer 1, the core: what a Tensor and its autograd need, below the libraries (nn, optim, amp, utils, cuda)
and the memory intelligence, which build on it.

  state.py       per-thread state: grad mode, saved-tensor hooks, the modules running, recomputation
  hooks.py       slots through which a higher layer (gpumemnet.memory) is called from here and the libraries
  dtype.py, random.py, scope.py   dtypes, devices and memory formats, the Philox generator and Generator,
                 allocation category/scope
  autograd.py    Function, the backward engine, grad mode
  offload.py     host copies for offload (bytes moved counted), save_on_cpu
  autocast.py    autocast's per-thread state and the casts ops apply
  functions.py   the differentiable elementwise, reduction and shape Functions
  activation.py  relu, sigmoid, tanh, gelu, softmax (Tensor methods and nn.functional ops)
  arg_forms.py   NumPy's axis= / keepdims= and NumPy integer scalars where PyTorch's parser takes them
  indexing.py    x[idx], x[idx] = v
  tensor_math.py     sin ... exp2, reciprocal, lerp, addcmul, the in-place unary forms (exp_, sqrt_ ...)
  tensor_methods.py  the Tensor methods composed of other ops (split, repeat, round, new_*, memory formats)
  tensor_compose.py  cumsum, cumprod, logsumexp, tril/triu, diagonal (a view), diag, outer, dot, tile, stride...
  tensor_select.py   scatter, index_add/copy/fill, masked_select, nonzero, unique, bincount
  size.py            Size (torch.Size): the type of Tensor.shape, with its C half _C.SizeBase
  tensor_more.py     median, quantile, cummax, logcumsumexp, repeat_interleave, unfold, squeeze_, type(), ...
  tensor_bitwise.py  bitwise ops, gcd, lcm on integer tensors (on the host) and PyTorch's type promotion
  tensor_gamma.py    the values of lgamma, digamma, polygamma, erfinv, i0 (float64 series)
  tensor_special.py  acosh, lgamma, erfinv, copysign, heaviside, fmax, eq / gt by name (+ tensor_bitwise's names)
  tensor_solve.py    det, slogdet, inverse, solve, cholesky, matrix_power, matrix_exp (elimination on the device)
  tensor_stats.py    cov, corrcoef, trapezoid, cumulative_trapezoid
  tensor_products.py kron, inner, mv, addmm, baddbmm, block_diag, cartesian_prod, cross ... (+ solve's, stats')
  tensor_misc_extra.py  shapes and helpers: ravel, hsplit, column_stack, as_strided, vander, windows, ...
  tensor_misc_values.py masked_scatter, scatter_reduce, index_reduce, mode, nanmedian, renorm, isin, ...
  tensor_misc.py     random_ and the other in-place fills, get_device, retains_grad, ... (+ the two above)
  tensor_reduce.py   sum, mean, amax/amin, max/min, argmax/argmin, var/std (the hot reductions)
  tensor.py      gpumemnet.Tensor
  einsum.py      gm.einsum, composed of diagonal, sum, permute, reshape and matmul
  creation.py    tensor, zeros, rand, cat, ... (the gm.* factory functions)
  creation_more.py  normal, multinomial, searchsorted, histc, cdist, broadcast_*, std_mean, tril_indices, ...
Each imports only _C and the ones listed above it (tests/test_layers_python.py checks there is no cycle and
nothing imported from a higher layer)."""
