"""Instructions per `a + b` on 16 float32, under valgrind's callgrind (stable on a busy machine, unlike time).

    python benchmarks/_opcount.py torch|gm N GOFILE      (run by benchmarks/_callgrind.py under valgrind)

The process starts with callgrind's instrumentation off (--instr-atstart=no: the imports run at valgrind's plain
speed), prints "ready", and waits for GOFILE, which the parent creates after `callgrind_control -i on`. Every call
of getppid() dumps a profile part (--dump-before=getppid), so the parts are: the wait, N ops with grad, 2N ops
with grad, N ops without, 2N ops without. Part (2N) - part (N) is N ops: the loop's and the dump's fixed costs
cancel.
"""
import os
import sys
import time

backend, n, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if backend == "gm":
    import gpumemnet as gm
    gm.as_torch()
import torch  # noqa: E402

torch.set_num_threads(1)
a, b = torch.rand(16), torch.rand(16)
ag, bg = torch.rand(16, requires_grad=True), torch.rand(16, requires_grad=True)


def run(x, y, k):
    for _ in range(k):
        x + y


run(ag, bg, 200)  # warm: first-call caches, the allocator's free lists
run(a, b, 200)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
for x, y in ((ag, bg), (a, b)):
    os.getppid()
    run(x, y, n)
    os.getppid()
    run(x, y, 2 * n)
os.getppid()
os._exit(0)  # PyTorch's teardown under instrumentation costs more than the rest together
