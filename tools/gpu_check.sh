#!/usr/bin/env bash
# tools/gpu_check.sh OUTDIR [WHEELDIR] — the whole GPU check of issue 4 on a fresh CUDA machine, in one run:
#   1. build gpumemnet with CUDA (cuDNN from the toolkit or the nvidia-cudnn wheel)      -> build.log, info.txt
#   2. the test suite, CUDA tests included (every op CPU vs CUDA)                          -> pytest.log, junit.xml
#   3. compute-sanitizer --tool memcheck over the CUDA op tests, caching off              -> sanitizer.log
#   4. the GPU benchmarks: `python -m benchmarks --quick --device cuda` (every model and mode of issue 14 and the
#      kernels, beside PyTorch), training steps at larger batches, fused Adam vs copy bandwidth, estimate vs
#      measured peak, CPU Adam vs memcpy, story 000 on an 8 and a 6 GiB card with offload   -> bench.log
#   5. summary.json: every status, test count and figure
# The machine needs Python >= 3.10 with NumPy and pytest (PyTorch for the side-by-side figures); it may have no
# network: WHEELDIR is a folder of wheels for what is missing (scipy-openblas32 at least; tools/fetch_gpu_wheels.sh
# fills one). The venv sees the system's packages, so PyTorch and the nvidia-* wheels are reused.
# The whole run fits GPU_CHECK_SECONDS (default 540: a lent machine gives one command 10 minutes and a session 15,
# start included): each step's time limit is its own or what is left, whichever is less, and the benchmarks go in
# order of importance, each skipped when too little is left. The tests are the CUDA ones (tests/test_cuda_*.py:
# every op CPU vs CUDA, training, estimate vs measured); the CPU suite is CI's. Exit status: 0 when the build,
# the tests and the sanitizer passed on a visible GPU; otherwise the first failing step's number (3: no GPU).
# GPU_CHECK_PARTS (default "tests sanitizer bench") names the steps after the build to run: a short diagnostic run
# (GPU_CHECK_PARTS=anatomy or overhead: benchmarks/cuda_step_anatomy.py or cuda_conv_overhead.py alone) leaves lease time for the whole check; the exit
# status then counts only the build and the steps run. GPU_CHECK_TESTS (paths, default every tests/test_cuda_*.py)
# narrows the tests.
set -uo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUTDIR [WHEELDIR]" >&2
    exit 2
fi
out=$(mkdir -p "$1" && cd "$1" && pwd)
wheels=${2:+$(cd "$2" && pwd)}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
fi
jobs=$(nproc 2>/dev/null || echo 8)
# sm_90 only: this script runs on Hopper; one target halves the compile time
export GPUMEMNET_CUDA=1 GPUMEMNET_CUDA_ARCHS=${GPUMEMNET_CUDA_ARCHS:-sm_90} GPUMEMNET_JOBS=$jobs
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=${PYTHON:-python3}
# a python3 that is itself a venv (the GPU image's /opt/torch/.venv) lends the new one its base's packages, not its
# own: its site-packages go in by a .pth file (read before the new venv's python3 comes first on PATH)
parent=$("$py" -c 'import site; print("\n".join(site.getsitepackages()))')
"$py" -m venv --system-site-packages "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"
echo "$parent" > "$(python -c 'import site; print(site.getsitepackages()[0])')/parent.pth"

step() { echo "== gpu_check: $* ($(date -u +%H:%M:%S), $((budget - SECONDS)) s left)"; }
budget=${GPU_CHECK_SECONDS:-540}
# limit N: N seconds, or what is left of the budget less 15 s for the summary (at least 1)
limit() { local l=$((budget - SECONDS - 15)); [ "$l" -lt "$1" ] || l=$1; [ "$l" -gt 1 ] || l=1; echo "$l"; }

# ---- 1. build ---------------------------------------------------------------------------------------------------
step "build"
t0=$SECONDS build_rc=0
{
    if [ -n "$wheels" ]; then
        pip install --no-index --find-links "$wheels" --no-deps "$wheels"/*.whl || exit 1
    fi
    python -c "import numpy, scipy_openblas32, pytest, setuptools" || exit 1
    timeout "$(limit 300)" pip install -v --no-build-isolation --no-deps . || exit 1
} >"$out/build.log" 2>&1 || build_rc=1
build_s=$((SECONDS - t0))
grep -m1 -h "gpumemnet: building" "$out/build.log"
if [ "$build_rc" -ne 0 ]; then
    tail -n 40 "$out/build.log"
fi

parts=" ${GPU_CHECK_PARTS:-tests sanitizer bench} "
want() { [[ "$parts" == *" $1 "* ]]; }
test_rc=1 san_rc=1 bench_rc=1 test_s=0 san_s=0 bench_s=0
want tests || test_rc=0
want sanitizer || san_rc=0
if [ "$build_rc" -eq 0 ]; then
    cd "$work"  # import the installed package, not the source tree
    python -m gpumemnet >"$out/info.txt" 2>&1
    cat "$out/info.txt"

    # ---- 2. tests (xdist when present: 16 cores, one GPU) -------------------------------------------------------
    if want tests; then
    step "tests"
    t0=$SECONDS
    par=$(python -c "import xdist" 2>/dev/null && echo "-n 8")
    # the CPU-vs-CUDA files, and the cuda cases of the files written for every device that have CUDA kernels of
    # their own (-k cuda keeps every test of the former: their module names match)
    tests=${GPU_CHECK_TESTS:-"$repo/tests/test_cuda_*.py $repo/tests/test_nn_rnn.py -k cuda"}
    # shellcheck disable=SC2086
    timeout "$(limit 150)" python -m pytest -q $par $tests -p no:cacheprovider \
        --junitxml="$out/junit.xml" >"$out/pytest.log" 2>&1
    test_rc=$?
    test_s=$((SECONDS - t0))
    tail -n 12 "$out/pytest.log"
    fi

    # ---- 3. compute-sanitizer over the CUDA op tests, every tensor its own cudaMalloc -------------------------
    if want sanitizer; then
    step "compute-sanitizer memcheck"
    t0=$SECONDS
    if command -v compute-sanitizer >/dev/null 2>&1; then
        # the kernels a training step runs (the whole CUDA suite under memcheck takes far longer than a lease)
        # memcheck's verdict is its exit status 9 and ERROR SUMMARY; a test failing under GPUMEMNET_NO_CACHING
        # (byte counts assume the caching allocator) is reported in the log but is not a memory error
        GPUMEMNET_NO_CACHING=1 timeout "$(limit 75)" compute-sanitizer --tool memcheck --error-exitcode 9 \
            --print-limit 20 --target-processes all python -m pytest -q -p no:cacheprovider \
            "$repo"/tests/test_cuda_{conv,pool,optim,amp,norms,reduce}.py >"$out/sanitizer.log" 2>&1
        san_rc=$?
        if [ "$san_rc" -ne 9 ] && grep -q "ERROR SUMMARY: 0 errors" "$out/sanitizer.log"; then san_rc=0; fi
    else
        echo "compute-sanitizer not found" >"$out/sanitizer.log"
        san_rc=127
    fi
    san_s=$((SECONDS - t0))
    tail -n 6 "$out/sanitizer.log"
    fi

    # ---- where a CUDA step's time goes, beside PyTorch (issue 14, item 6) ----------------------------------------
    if want anatomy; then
        step "anatomy"
        (cd "$repo" && timeout "$(limit 300)" python benchmarks/cuda_step_anatomy.py --json "$out/anatomy.json") \
            >"$out/anatomy.log" 2>&1
        cat "$out/anatomy.log"
    fi
    if want overhead; then  # the host's cost of one convolution call, piece by piece (py-spy when carried)
        step "conv overhead"
        (cd "$repo" && timeout "$(limit 150)" python benchmarks/cuda_conv_overhead.py --pyspy "$out") \
            >"$out/overhead.log" 2>&1
        cat "$out/overhead.log"
    fi

    # ---- 4. benchmarks -----------------------------------------------------------------------------------------
    if want bench; then
    step "benchmarks"
    t0=$SECONDS bench_rc=0
    {
        # from the repository root (the benchmarks package); its workers import the installed gpumemnet.
        # Instruction counts are a CPU figure: callgrind is left to the CPU runs.
        # in order of importance; each capped by what is left (limit)
        (cd "$repo" && timeout "$(limit 120)" python -m benchmarks --quick --device cuda --only models conv adam \
            overhead --json "$work/bench.json") || bench_rc=$?
        timeout "$(limit 40)" python "$repo/benchmarks/cuda_estimate_accuracy.py" --json "$work/estimate.json" \
            || bench_rc=$?
        # issue 15: story 000's full net trained on an 8 GiB card (set_limit) by the plan gm.memory.plan picks
        # (offloaded Adam), planned vs measured; then the 6 GiB card with bf16 parameters
        timeout "$(limit 90)" python "$repo/examples/seed000_regression.py" --full --card 8GiB --steps 3 | tail -n 2 \
            || bench_rc=$?
        timeout "$(limit 40)" python "$repo/benchmarks/gpu_adam.py" --json "$work/adam.json" || bench_rc=$?
        timeout "$(limit 60)" python "$repo/benchmarks/gpu_train_step.py" --json "$work/train.json" || bench_rc=$?
        timeout "$(limit 30)" python "$repo/benchmarks/offload_overlap_estimate.py" || bench_rc=$?
        timeout "$(limit 90)" python "$repo/examples/seed000_regression.py" --full --card 6GiB --steps 3 | tail -n 2 \
            || bench_rc=$?
        timeout "$(limit 60)" python "$repo/benchmarks/story000_adam.py" --offload --calibrate --steps 5 \
            || bench_rc=$?
        timeout "$(limit 30)" python "$repo/benchmarks/offload_adam.py" --json "$work/offload_adam.json" \
            || bench_rc=$?
    } >"$out/bench.log" 2>&1
    bench_s=$((SECONDS - t0))
    cat "$out/bench.log"
    fi
fi

# ---- 5. summary ---------------------------------------------------------------------------------------------------
OUT="$out" WORK="$work" BUILD_RC=$build_rc BUILD_S=$build_s TEST_RC=$test_rc TEST_S=$test_s SAN_RC=$san_rc \
SAN_S=$san_s BENCH_RC=$bench_rc BENCH_S=$bench_s python - <<'PY'
import json, os, xml.etree.ElementTree as ET
env = os.environ
out, work = env["OUT"], env["WORK"]
s = {k.lower(): int(env[k]) for k in ("BUILD_RC", "BUILD_S", "TEST_RC", "TEST_S", "SAN_RC", "SAN_S", "BENCH_RC",
                                        "BENCH_S")}
try:
    from gpumemnet import _C, cuda
    s["build_info"] = _C._build_info()
    s["devices"] = [{"name": p.name, "total_memory": p.total_memory, "capability": f"{p.major}.{p.minor}",
                     "sms": p.multi_processor_count}
                    for p in (cuda.get_device_properties(i) for i in range(cuda.device_count()))]
except Exception as e:
    s["import_error"] = f"{type(e).__name__}: {e}"
junit = os.path.join(out, "junit.xml")
if os.path.exists(junit):
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    n["passed"] = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    s["tests"] = n
for name in ("bench", "train", "adam", "estimate", "offload_adam"):
    path = os.path.join(work, f"{name}.json")
    if os.path.exists(path):
        s[name] = json.load(open(path))
s["gpu_found"] = bool(s.get("devices"))
parts = os.environ.get("GPU_CHECK_PARTS", "tests sanitizer bench").split()
s["parts"] = parts
s["ok"] = (s["build_rc"] == 0 and s["test_rc"] == 0 and ("tests" not in parts or s.get("tests", {}).get("tests", 0) > 0)
           and s["san_rc"] == 0 and s["gpu_found"])
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(s, f, indent=2)
print(json.dumps({k: s.get(k) for k in ("ok", "build_rc", "test_rc", "san_rc", "bench_rc", "gpu_found", "tests")}))
PY

[ "$build_rc" -eq 0 ] || exit 1
python -c 'import gpumemnet.cuda as c, sys; sys.exit(c.device_count() == 0)' || exit 3
[ "$test_rc" -eq 0 ] || exit 2
[ "$san_rc" -eq 0 ] || exit 4
exit 0
