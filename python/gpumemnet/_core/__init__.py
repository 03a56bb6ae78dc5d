"""Layer 1, the core: Tensor, autograd, the differentiable functions, creation, indexing, dtypes, the random
stream, per-thread state and the hooks through which higher layers reach back in.

Modules here import only _C, _loader and each other (in one direction: state/hooks/dtype < autograd <
functions < indexing < tensor < creation); nothing here imports nn, optim, amp, utils, cuda or memory
(tests/test_layers_python.py checks it)."""
