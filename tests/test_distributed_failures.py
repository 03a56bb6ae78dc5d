"""A rank that fails (raises, bad input, out of memory, or never joins) makes the whole job end with a clear error
instead of hanging: uncaught exceptions MPI_Abort every rank (process_group's excepthook) and collectives give up
after the process group's timeout with DistBackendError (tests/dist_workers/failures.py)."""
import time

import pytest

from dist_util import run

ABORT = "MPI_Abort ends every rank"


def job(mode):
    t0 = time.monotonic()
    proc = run("failures.py", 2, mode, timeout=90)
    return proc, time.monotonic() - t0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"


@pytest.mark.parametrize("mode, error", [
    ("raise", "ValueError: rank 1 fails on purpose"),
    ("bad_input", "ValueError: all_reduce: tensor must be contiguous"),
    ("oom", "OutOfMemoryError"),
])
def test_a_rank_that_raises_ends_every_rank(mode, error):
    proc, took, text = job(mode)
    assert proc.returncode != 0, text
    assert error in proc.stderr and f"rank 1 of 2 raised" in proc.stderr and ABORT in proc.stderr, text
    assert "finished rank" not in proc.stdout, text  # rank 0 was stopped inside its all_reduce
    assert took < 60, f"took {took:.0f} s (the collective timeout is 120 s: only the abort can end it sooner)"


def test_a_rank_that_exits_ends_every_rank():
    """sys.exit(3) on one rank: no excepthook runs there (SystemExit), and its exit waits for the others (MPI_Finalize
    after a barrier with the timeout); rank 0's all_reduce times out and aborts the job."""
    proc, took, text = job("exit")
    assert proc.returncode != 0 and "finished rank" not in proc.stdout, text
    assert "rank 0 of 2 raised DistBackendError" in proc.stderr, text
    assert took < 60, f"took {took:.0f} s"


@pytest.mark.parametrize("mode, op, limit", [("timeout", "all_reduce", "2"), ("wait_timeout", "all_reduce", "1"),
                                            ("new_group_timeout", "new_group", "2")])
def test_a_rank_that_never_joins_times_out(mode, op, limit):
    proc, took, text = job(mode)
    assert proc.returncode != 0, text
    assert f"DistBackendError: {op}: rank 0 of 2 waited {limit} s" in proc.stderr, text
    assert "rank 0 of 2 raised DistBackendError" in proc.stderr and ABORT in proc.stderr, text
    assert took < 50, f"took {took:.0f} s: rank 1 sleeps 60 s, the abort must end it first"
