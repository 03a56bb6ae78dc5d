#!/usr/bin/env bash
# tools/sanitize.sh [PYTEST ARGS...] — the test suite on an AddressSanitizer + UndefinedBehaviorSanitizer build.
#
#   bash tools/sanitize.sh                 # every test under tests/ (about 11 minutes on 2 cores)
#   bash tools/sanitize.sh tests/test_conv_forward.py -k depthwise
#
# Builds gpumemnet._C with GPUMEMNET_SANITIZE=1 (setup.py: -fsanitize=address,undefined -fno-wrapv) into a
# temporary folder, runs pytest against that build with the sanitizer runtime preloaded (CPython itself is not
# instrumented), and fails when pytest fails or when any sanitizer wrote a report, even from a test that passed:
# UBSan goes on after a report, so the reports are collected in files and counted at the end. Leak checking is
# off: CPython keeps objects alive until exit by design, which LeakSanitizer would report by the thousand.
# Uses the python on PATH (with numpy, scipy-openblas32, safetensors and pytest installed).
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
py=${PYTHON:-python}

cd "$repo"
if ! GPUMEMNET_SANITIZE=1 GPUMEMNET_CUDA=0 "$py" setup.py -q build --build-base "$work/build" >"$work/build.log" 2>&1
then
    tail -n 40 "$work/build.log"
    echo "sanitize: the sanitizer build failed" >&2
    exit 1
fi
lib=$(ls -d "$work"/build/lib.*)
asan=$(${CC:-gcc} -print-file-name=libasan.so)
mkdir -p "$work/reports"

[ $# -gt 0 ] || set -- "$repo/tests"
args=()
for a in "$@"; do  # relative test paths are the repo's: pytest runs from the work folder (no in-place _C there)
    if [ -e "$repo/$a" ]; then args+=("$repo/$a"); else args+=("$a"); fi
done

# Resident-memory checks are meaningless here: ASan keeps freed memory in quarantine by design.
args+=(--deselect "tests/test_oom_recover.py::test_a_thousand_ooms_keep_memory_flat")  # (node ids are the repo's)

rc=0
(cd "$work" && LD_PRELOAD="$asan" PYTHONPATH="$lib" \
    ASAN_OPTIONS="detect_leaks=0:log_path=$work/reports/asan" \
    UBSAN_OPTIONS="print_stacktrace=1:log_path=$work/reports/ubsan" \
    "$py" -m pytest -q -p no:cacheprovider "${args[@]}") || rc=$?

# A report is an ASan "ERROR:" or a UBSan "runtime error:". ASan's warnings alone (the emulator's test programs
# switch stacks with swapcontext, which ASan warns may give false positives) are not reports; they are shown.
reports=$(grep -l -E "ERROR: AddressSanitizer|runtime error:" "$work"/reports/* 2>/dev/null)
for f in "$work"/reports/*; do
    [ -e "$f" ] || continue
    if grep -q -F -x "$f" <<<"$reports"; then echo "== report $f"; head -n 40 "$f"
    else echo "== warning only: $f: $(head -n 1 "$f")"; fi
done
if [ -n "$reports" ]; then
    echo "sanitize: $(wc -l <<<"$reports") sanitizer report file(s)" >&2
    exit 1
fi
[ "$rc" -ne 5 ] || { echo "sanitize: pytest collected no tests" >&2; exit 1; }
[ "$rc" -eq 0 ] && echo "sanitize: no sanitizer reports"
exit "$rc"
