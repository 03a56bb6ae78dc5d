#!/usr/bin/env bash
# tools/fetch_gpu_wheels.sh DIR — download the wheels tools/gpu_check.sh needs on the GPU machine that its image
# lacks (it has Python 3.12, NumPy, pytest, PyTorch, setuptools; not scipy-openblas32 nor mpich), for CPython 3.12 on
# x86-64 Linux, into DIR. Run it where pip can reach the package index, then carry DIR to the GPU machine.
set -euo pipefail
dir=${1:?usage: $0 DIR}
mkdir -p "$dir"
python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$dir" "scipy-openblas32>=0.3.27" "mpich==5.0.2"  # mpich: MPI + mpiexec for the distributed tests (NCCL)
ls -l "$dir"
