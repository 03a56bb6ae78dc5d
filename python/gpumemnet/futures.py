"""gpumemnet.futures: PyTorch's torch.futures.Future, for what DDP's communication hooks return and
gpumemnet.distributed's Work.get_future() (layer 2).

A Future holds one value, set once: by set_result, by the collective it stands for when that completes, or by
the callback of then() from the future it was chained to. gpumemnet runs no threads of its own, so callbacks run
lazily, in the thread that asks: when the chained future is waited on, or its done() / value() is asked. That
also fixes when a callback releases what it held (a hook's compressed copy of a bucket), whether the collective
finished early or late, which keeps memory estimates of a step with a hook byte-exact."""

__all__ = ["Future", "collect_all", "wait_all"]

_UNSET = object()


class Future:
    """A value that becomes available later (PyTorch's torch.futures.Future)."""

    def __init__(self, *, devices=None):
        self._value, self._error = _UNSET, None
        self._work = None               # a gpumemnet.distributed Work whose result this is
        self._parent = self._callback = None   # then(): the future chained to, and the callback on it
        self._done_callbacks = []

    @classmethod
    def _of_work(cls, work):
        f = cls()
        f._work = work
        return f

    def _resolved(self):
        return self._value is not _UNSET or self._error is not None

    def _settle(self, value=_UNSET, error=None):
        self._value, self._error = value, error
        self._work = self._parent = self._callback = None  # release what produced it (its buffers)
        callbacks, self._done_callbacks = self._done_callbacks, []
        for cb in callbacks:
            cb(self)

    def _run_callback(self):
        parent, cb = self._parent, self._callback
        try:
            value = cb(parent)
        except Exception as e:  # PyTorch: the chained future holds the callback's error
            self._settle(error=e)
        else:
            self._settle(value)

    def done(self):
        """Whether the value (or an error) is there; asks the collective behind it, and runs a due callback."""
        if self._resolved():
            return True
        if self._work is not None:
            if self._work.is_completed():
                self._settle(self._work.result())
        elif self._parent is not None and self._parent.done():
            self._run_callback()
        return self._resolved()

    def wait(self):
        """Block until the value is there and return it (raise the error that was set instead)."""
        if not self._resolved():
            if self._work is not None:
                self._work.wait()
                self._settle(self._work.result())
            elif self._parent is not None:
                self._parent._wait_quietly()
                self._run_callback()
            else:
                raise RuntimeError("Future.wait: no result was set and nothing will set it (set_result first)")
        if self._error is not None:
            raise self._error
        return self._value

    def _wait_quietly(self):
        try:
            self.wait()
        except Exception:  # the error stays in this future; the callback sees it through value()
            pass

    def value(self):
        """The value of a completed future (raises its error, or RuntimeError if it has not completed)."""
        if not self.done():
            raise RuntimeError("Future.value: the future has not completed; call wait() first")
        if self._error is not None:
            raise self._error
        return self._value

    def then(self, callback):
        """A future of callback(self), run once this one completed (see the module docstring for when)."""
        if not callable(callback):
            raise TypeError(f"Future.then: callback must be callable, got {type(callback).__name__}")
        child = Future()
        child._parent, child._callback = self, callback
        return child

    def add_done_callback(self, callback):
        """Run callback(self) when this future completes (at once if it has)."""
        if not callable(callback):
            raise TypeError(f"Future.add_done_callback: callback must be callable, got {type(callback).__name__}")
        if self._resolved():
            callback(self)
        else:
            self._done_callbacks.append(callback)

    def set_result(self, result):
        if self._resolved():
            raise RuntimeError("Future can only be marked completed once.")
        self._settle(result)

    def set_exception(self, result):
        if not isinstance(result, BaseException):
            raise TypeError(f"Future.set_exception: expected an exception, got {type(result).__name__}")
        if self._resolved():
            raise RuntimeError("Future can only be marked completed once.")
        self._settle(error=result)

    def __class_getitem__(cls, item):  # Future[Tensor] in type annotations, as PyTorch's
        return cls

    def __repr__(self):
        state = "done" if self._resolved() else "pending"
        return f"Future({state})"


def collect_all(futures):
    """A future of the list of futures, completed when they all are."""
    out = Future()
    futures = list(futures)
    out._parent, out._callback = _All(futures), (lambda _: futures)
    return out


def wait_all(futures):
    """Wait for every future; the list of their values."""
    return [f.wait() for f in futures]


class _All:
    """collect_all's parent: done when every future is."""

    def __init__(self, futures):
        self.futures = futures

    def done(self):
        return all(f.done() for f in self.futures)

    def _wait_quietly(self):
        for f in self.futures:
            f._wait_quietly()
