"""gpumemnet's benchmarks: `python -m benchmarks` (run from the repository root) measures gpumemnet beside
PyTorch in one run, with the same initial weights, data and thread count, and prints (and with --json writes)
every figure issue 14 compares:

- models (benchmarks/_models.py): torchvision's resnet18 and mobilenet_v2 and a VGG-11 with a global-average-pool
  head (torchvision's own model files, run by gpumemnet under its torch alias), examples/seed002_unet.py's UNet
  and the demo's digits CNN, in the modes fp32, checkpoint, autocast and eval (no_grad). Each side is a worker
  process (benchmarks/_worker.py; real PyTorch and the alias cannot share one); PyTorch builds the model from
  torch.manual_seed(0) and gpumemnet loads that state. Time: paired rounds of one step on each side, the order
  alternating, median and spread (min-max) of each side and of the rounds' ratios gm / PyTorch.
  Peak memory: one step's peak above the bytes allocated before it ("step") and with them ("total").
  gpumemnet: its allocator's max_memory_allocated. PyTorch on the CPU keeps no allocator statistics: the running
  sum of the allocation/free events torch.profiler(profile_memory=True) records for the step (every allocation
  through c10's CPU allocator; a library's private scratch, e.g. oneDNN's, is not seen), plus the storages alive
  between steps (parameters, gradients, buffers, optimizer state, the batch) for the total. On CUDA both sides:
  the caching allocator's max_memory_allocated. Both count tensor bytes, not the process's RSS.
- kernels: conv2d forward / backward-data / backward-weight GFLOP/s as a share of one sgemm of the same FLOPs
  (each library against its own sgemm), Adam step bytes/s against copy bandwidth, the per-op cost of `a + b` on
  16 float32 in µs (paired rounds) and in instructions (valgrind's callgrind, the difference between N and 2N ops;
  skipped with a note when valgrind is missing).

`--quick` is the few-round version (under 3 minutes on 2 idle cores); `--markdown` writes README.md's figures
table. The rule for CPU figures: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset together; the command warns when
they are set and runs its workers without both.

The older single-purpose scripts beside this package still run on their own (`python benchmarks/<name>.py`):
train_step.py, op_overhead.py, conv_gflops.py (more shapes, depthwise), memory_techniques.py (accumulation and
combined techniques), omp_wait_policy.py, story000_adam.py, and the GPU ones tools/gpu_check.sh runs.
"""
