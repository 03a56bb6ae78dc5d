"""Helpers of the CUDA emulator's tests (tests/test_cuda_emu_*.py): the compiler commands of a GPUMEMNET_CUDA=emu
build (setup.py's compile_emulated), the PRELUDE each test program starts with, `run`, and the block/thread
orders of the scheduler. The session fixtures that compile the emulator and build programs (`runtime`, `build`)
live in conftest.py. Needs only a C++17 compiler; no GPU, no gpumemnet build."""
import os
import shutil
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERNELS = os.path.join(ROOT, "kernels")
EMU = os.path.join(KERNELS, "cuda", "emu")
INC = os.path.join(EMU, "include")

CXX = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
CC = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
requires_cxx = pytest.mark.skipif(not CXX, reason="no C++ compiler (g++ or c++, or $CXX) found: the emulator is C++17")

DEFS = ["-DGM_WITH_CUDA=1", "-DGM_CUDA_EMU=1", f"-I{INC}", f"-I{KERNELS}"]
# setup.py's flags for the emulated .cu files (compile_emulated)
CXXFLAGS = ["-std=c++17", "-O2", "-fPIC", "-Wall", "-Wno-unused-function", "-Wno-unknown-pragmas"] + DEFS

PRELUDE = r"""
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>
#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            printf("FAIL line %d: %s (last message: %s)\n", __LINE__, #cond, gm_emu_last_message()); \
            return 1;                                                                                 \
        }                                                                                             \
    } while (0)
#define CU(call) CHECK((call) == cudaSuccess)
"""


def compile_cmd(src, obj):
    if src.endswith(".c"):
        return [CC, "-std=c11", "-O2", "-fPIC", "-Wall", "-Wno-unknown-pragmas", "-c", src, "-o", obj] + DEFS
    return [CXX, "-x", "c++", "-c", src, "-o", obj] + CXXFLAGS


def compile_one(src, obj):
    r = subprocess.run(compile_cmd(src, obj), capture_output=True, text=True)
    assert r.returncode == 0, f"compiling {src} failed:\n{r.stderr}"
    return obj


def run(exe, *args, env=None):
    """Runs a test program with a clean emulator environment plus `env`; asserts it printed OK; returns stdout."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEMNET_EMU_")}
    e.update(env or {})
    r = subprocess.run([exe, *map(str, args)], capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("OK"), \
        f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


# Kernels must not depend on the order of blocks or threads: the order-independent tests run in three orders.
SCHEDULES = ["forward", "reverse", "random:12345"]
