"""Error cases of this topic: B(...) is run against PyTorch too, E(...) names something PyTorch has not
(error_inputs.py explains both). EXEMPT: public callables with no bad input, each with its reason.

gm.testing (assert_close, assert_allclose, make_tensor) and gm.profiler (profile, schedule, record_function,
tensorboard_trace_handler, the results' table)."""
from error_inputs import GM, HOST, B, ErrorInput, ix, z  # noqa: F401
from error_inputs_api import E  # noqa: F401


def _profiled(l):
    """A finished profile of one op."""
    p = l.L.profiler.profile(activities=[l.L.profiler.ProfilerActivity.CPU])
    with p:
        l.L.ones(2)
    return p


CASES = [
    # ---- gm.testing ----
    B("assert_close rtol without atol", lambda d, l: l.L.testing.assert_close(z(d, l, 2), z(d, l, 2), rtol=1e-3),
      ValueError, r"Both 'rtol' and 'atol' must be either specified or omitted, but got no atol"),
    B("assert_close tensor vs list", lambda d, l: l.L.testing.assert_close(z(d, l, 2), [0.0, 0.0]), TypeError,
      r"No comparison pair was able to handle inputs of type .*Tensor'> and <class 'list'>"),
    B("assert_close shapes differ", lambda d, l: l.L.testing.assert_close(z(d, l, 2), z(d, l, 3)), AssertionError,
      r"The values for attribute 'shape' do not match: .*Size\(\[2\]\) != .*Size\(\[3\]\)"),
    B("assert_close dtypes differ", lambda d, l: l.L.testing.assert_close(z(d, l, 2), z(d, l, 2, dtype="float64")),
      AssertionError, r"attribute 'dtype' do not match: .*float32 != .*float64"),
    B("assert_close values differ", lambda d, l: l.L.testing.assert_close(z(d, l, 2), ix(d, l, [0.0, 1.0])),
      AssertionError, r"Mismatched elements: 1 / 2 \(50.0%\)\nGreatest absolute difference: 1.0 at index \(1,\)",
      devices=HOST),
    B("assert_close sequence lengths", lambda d, l: l.L.testing.assert_close([z(d, l, 2)], []), AssertionError,
      r"The length of the sequences mismatch: 1 != 0"),
    B("assert_allclose values differ", lambda d, l: l.L.testing.assert_allclose(ix(d, l, [1.0]), [2.0]),
      AssertionError, r"Tensor-likes are not close", devices=("cpu",)),  # the list is a CPU tensor (as in PyTorch)
    B("make_tensor requires_grad of int64", lambda d, l: l.L.testing.make_tensor(2, dtype=l.L.int64, device=d,
                                                                               requires_grad=True),
      ValueError, r"`requires_grad=True` is not supported for boolean and integral dtypes"),
    B("make_tensor low above high", lambda d, l: l.L.testing.make_tensor(2, dtype=l.L.float32, device=d, low=3,
                                                                         high=1),
      ValueError, r"`low` must be less than `high`, but got 3 >= 1"),
    B("make_tensor interval outside the dtype", lambda d, l: l.L.testing.make_tensor(2, dtype=l.L.uint8, device=d,
                                                                                     low=-9, high=-1),
      ValueError, r"The value interval specified by `low` and `high` is \[-9, -1\), but .*uint8 only supports"),
    B("make_tensor of a non-dtype", lambda d, l: l.L.testing.make_tensor(2, dtype="float32", device=d), TypeError,
      r"The requested dtype 'float32' is not supported"),
    # ---- gm.profiler ----
    B("profiler.schedule with no active step", lambda d, l: l.L.profiler.schedule(wait=1, warmup=1, active=0),
      AssertionError, r"Invalid profiler schedule arguments.*active=0 \(need > 0\)"),
    B("profiler.schedule of a negative step", lambda d, l: l.L.profiler.schedule(wait=0, warmup=1, active=1)(-1),
      AssertionError, r"Step must be non-negative. Got -1"),
    B("profiler.profile with no activities", lambda d, l: l.L.profiler.profile(activities=[]), AssertionError,
      r"No valid profiler activities found"),
    B("profiler.profile with a string activity", lambda d, l: l.L.profiler.profile(activities=["cpu"]), TypeError,
      r"Expected ProfilerActivity or dict, got <class 'str'>"),
    B("profiler.profile events before it ran", lambda d, l: l.L.profiler.profile().events(), AssertionError,
      r"Profiler must be initialized before accessing events"),
    B("profiler.record_function of a non-str name", lambda d, l: l.L.profiler.record_function(3).__enter__(),
      RuntimeError, r"record_function: name must be a str, got int"),
    B("profiler table sorted by an unknown column",
      lambda d, l: _profiled(l).key_averages().table(sort_by="bogus"), AttributeError, r"bogus"),
    B("profiler.tensorboard_trace_handler into a file",
      lambda d, l: l.L.profiler.tensorboard_trace_handler("/dev/null/traces")(None), RuntimeError,
      r"Can't create directory: /dev/null/traces"),
]
EXEMPT = {}
