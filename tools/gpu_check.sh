#!/usr/bin/env bash
# tools/gpu_check.sh OUTDIR [WHEELDIR] — build gpumemnet with CUDA on a GPU machine, show what was built and
# run the test suite; results in OUTDIR (build.log, info.txt, pytest.log, junit.xml, summary.json).
# WHEELDIR: for a machine with no network, a folder of wheels (setuptools, wheel, numpy, scipy-openblas32,
# pytest) to install from with --no-index; the build then runs without isolation. Exit status: pytest's, or
# non-zero when the build failed, no tests ran, or no GPU was visible (3). Later versions add more checks.
set -euo pipefail

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
export GPUMEMNET_CUDA=${GPUMEMNET_CUDA:-1} PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${PYTHON:-python3}" -m venv "$work/venv"
# shellcheck disable=SC1091
. "$work/venv/bin/activate"

build_rc=0
t0=$SECONDS
if [ -n "$wheels" ]; then
    pip install -q --no-index --find-links "$wheels" setuptools wheel numpy scipy-openblas32 pytest \
        >"$out/build.log" 2>&1 || build_rc=$?
    [ "$build_rc" -ne 0 ] || pip install -v --no-build-isolation --no-index --find-links "$wheels" . \
        >>"$out/build.log" 2>&1 || build_rc=$?
else
    pip install -v ".[test]" >"$out/build.log" 2>&1 || build_rc=$?
fi
build_s=$((SECONDS - t0))
grep -m1 -h "gpumemnet: building" "$out/build.log" || true

test_rc=1 test_s=0
if [ "$build_rc" -eq 0 ]; then
    python -m gpumemnet 2>&1 | tee "$out/info.txt"
    t0=$SECONDS
    test_rc=0
    python -m pytest -q tests --junitxml="$out/junit.xml" >"$out/pytest.log" 2>&1 || test_rc=$?
    test_s=$((SECONDS - t0))
    tail -n 15 "$out/pytest.log"
else
    echo "gpu_check: build failed (exit $build_rc); end of $out/build.log:" >&2
    tail -n 60 "$out/build.log" >&2
fi

OUT="$out" BUILD_RC=$build_rc BUILD_S=$build_s TEST_RC=$test_rc TEST_S=$test_s python - <<'PY'
import json, os, xml.etree.ElementTree as ET
env = os.environ
out = env["OUT"]
s = {"build_rc": int(env["BUILD_RC"]), "build_seconds": int(env["BUILD_S"]),
     "pytest_rc": int(env["TEST_RC"]), "pytest_seconds": int(env["TEST_S"])}
try:
    from gpumemnet import _C, cuda
    info = _C._build_info()
    s["build_info"] = info
    s["cuda_built"] = info["cuda"] is not None
    s["devices"] = [{"index": i, "name": p.name, "total_memory": p.total_memory, "capability": f"{p.major}.{p.minor}",
                     "multi_processor_count": p.multi_processor_count}
                    for p in (cuda.get_device_properties(i) for i in range(cuda.device_count()))]
except Exception as e:  # the build failed: summary.json still says so
    s["import_error"] = f"{type(e).__name__}: {e}"
junit = os.path.join(out, "junit.xml")
if os.path.exists(junit):
    root = ET.parse(junit).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    n = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    n["passed"] = n["tests"] - n["failures"] - n["errors"] - n["skipped"]
    s["tests"] = n
s["gpu_found"] = bool(s.get("devices"))
s["ok"] = (s["build_rc"] == 0 and s["pytest_rc"] == 0 and s.get("tests", {}).get("tests", 0) > 0
           and s["gpu_found"])
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(s, f, indent=2)
print(json.dumps({k: s.get(k) for k in ("ok", "build_rc", "pytest_rc", "gpu_found", "tests")}))
PY

[ "$build_rc" -eq 0 ] || exit "$build_rc"
[ "$test_rc" -ne 5 ] || { echo "gpu_check: pytest collected no tests" >&2; exit 1; }
[ "$test_rc" -ne 0 ] || python -c 'import gpumemnet.cuda as c, sys; sys.exit(c.device_count() == 0)' \
    || { echo "gpu_check: tests passed, but no CUDA device was visible: this was not a GPU check" >&2; exit 3; }
exit "$test_rc"
