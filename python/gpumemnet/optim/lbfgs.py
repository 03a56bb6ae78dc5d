"""LBFGS: PyTorch's limited-memory BFGS (one parameter group; every parameter flattened into one vector; step
needs a closure that re-evaluates the loss and its gradients; optional strong-Wolfe line search), with its
iterates and its state_dict keys (d, t, old_dirs, old_stps, ro, H_diag, prev_flat_grad, prev_loss, al,
func_evals, n_iter, all kept under the first parameter as PyTorch does).

The curvature terms (ys, ro = 1/ys, H_diag = ys / y.y and the two-loop's al, be) are 0-dim tensors of the
parameters' dtype, computed in it and kept so in the state, as PyTorch's; the other scalars of the algorithm
(directional derivatives, step lengths) are Python floats read back from the device each iteration, as PyTorch's
own comparisons read them: the step depends on values, so it cannot run on the meta device. The history vectors
(history_size pairs of the flattened size) and the direction are tagged "optimizer"."""

import numpy as np

from .. import _C
from .._core.autograd import enable_grad, no_grad
from .._core.creation import cat, zeros
from .._core.scope import category, scope
from .optimizer import Optimizer, _is_tensor

__all__ = ["LBFGS"]


def _cubic_min(x1, f1, g1, x2, f2, g2, bounds=None):
    """Minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2, clamped to bounds (default: the
    interval between the points); the midpoint of the bounds when the cubic has no real minimiser."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    # IEEE arithmetic, as PyTorch's (its scalars are tensors): an objective without a lower bound divides by zero
    # here and gets inf or NaN, where Python floats raise ZeroDivisionError
    with np.errstate(all="ignore"):
        x1, f1, g1, x2, f2, g2 = (np.float64(v) for v in (x1, f1, g1, x2, f2, g2))
        d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
        disc = d1 * d1 - g1 * g2
        if not disc >= 0:  # (NaN too, as PyTorch's test)
            return float((np.float64(lo) + hi) / 2.0)
        d2 = np.sqrt(disc)
        if x1 <= x2:
            x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return float(min(max(x, lo), hi))


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """Line search along d from the current point (loss f, flat gradient g, slope gtd = g.d) for a step t
    meeting the strong Wolfe conditions (Nocedal & Wright, algorithms 3.5 and 3.6: bracket, then zoom by cubic
    interpolation). evaluate(t) -> (loss, flat gradient) at x + t d. Returns (loss, grad, t, evaluations)."""
    d_norm = float(d.abs().max())
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = float(g_new.dot(d))
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    it = 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while it < max_ls:
        if f_new > f + c1 * t * gtd or (it > 1 and f_new >= f_prev):
            bracket, bracket_f, bracket_g = [t_prev, t], [f_prev, f_new], [g_prev, g_new]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f, bracket_g = [t_prev, t], [f_prev, f_new], [g_prev, g_new]
            bracket_gtd = [gtd_prev, gtd_new]
            break
        # extrapolate: the next trial lies beyond t, at most 10 t
        t_next = _cubic_min(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = t_next
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        it += 1
    if it == max_ls:
        bracket, bracket_f, bracket_g = [0.0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket until a point satisfies the conditions or the bracket is too small to matter
    insufficient = False
    low, high = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and it < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_min(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1])
        b_lo, b_hi = min(bracket), max(bracket)
        eps = 0.1 * (b_hi - b_lo)
        if min(b_hi - t, t - b_lo) < eps:
            # too close to an end: after a second time in a row (or on the end itself), move 10% inside
            if insufficient or t >= b_hi or t <= b_lo:
                t = b_hi - eps if abs(t - b_hi) < abs(t - b_lo) else b_lo + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = float(g_new.dot(d))
        it += 1
        if f_new > f + c1 * t * gtd or f_new >= bracket_f[low]:
            bracket[high], bracket_f[high], bracket_g[high], bracket_gtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bracket_f[high] = bracket[low], bracket_f[low]
                bracket_g[high], bracket_gtd[high] = bracket_g[low], bracket_gtd[low]
            bracket[low], bracket_f[low], bracket_g[low], bracket_gtd[low] = t, f_new, g_new, gtd_new
    return bracket_f[low], bracket_g[low], bracket[low], evals


def _scalar(v):
    return float(v) if _is_tensor(v) else v


class LBFGS(Optimizer):
    """L-BFGS (after minFunc): each step runs up to max_iter quasi-Newton iterations, max_eval closure calls."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None, *, maximize=False):
        if _is_tensor(lr) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change, history_size=history_size,
                                      line_search_fn=line_search_fn, maximize=maximize))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    # ---- the flat vector view of the parameters --------------------------------------------------------------
    def _flat_grad(self):
        parts = []
        for p in self._params:
            g = p.grad
            parts.append(zeros(p.numel(), dtype=p.dtype, device=p.device) if g is None else g.reshape(-1))
        flat = cat(parts, 0) if len(parts) > 1 else parts[0].clone()
        if self.param_groups[0]["maximize"]:
            flat.neg_()
        return flat

    def _add_to_params(self, step, direction):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset:offset + n].view_as(p) * step)
            offset += n

    def _evaluate(self, closure, x, t, d):
        """Loss and flat gradient at x + t d; the parameters are put back to x afterwards."""
        self._add_to_params(t, d)
        loss = float(closure())
        if self.param_groups[0]["maximize"]:
            loss = -loss
        flat = self._flat_grad()
        for p, v in zip(self._params, x):
            _C.copy_(p, v)
        return loss, flat

    # ---- the step ------------------------------------------------------------------------------------------
    def step(self, closure):
        """Run up to max_iter iterations; closure() (called with grad enabled) must zero the gradients, compute
        the loss, call backward() and return the loss. Returns the loss of the first evaluation."""
        def evaluate():
            with enable_grad(), category(outer):
                return closure()

        outer = _C.set_category("optimizer")
        try:
            with no_grad(), scope("LBFGS.step"):
                return self._step(evaluate)
        finally:
            _C.set_category(outer)

    def _step(self, closure):
        if len(self.param_groups) != 1:
            raise AssertionError(f"LBFGS: expected exactly one param_group, but got {len(self.param_groups)}")
        if not self._params:
            return closure()
        group = self.param_groups[0]
        lr = _scalar(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search, history_size, maximize = group["line_search_fn"], group["history_size"], group["maximize"]

        st = self.state[self._params[0]]  # the state is global; PyTorch keeps it under the first parameter
        st.setdefault("func_evals", 0)
        st.setdefault("n_iter", 0)

        orig_loss = closure()
        loss = -float(orig_loss) if maximize else float(orig_loss)
        evals = 1
        st["func_evals"] += 1
        flat_grad = self._flat_grad()
        if float(flat_grad.abs().max()) <= tol_grad:
            return orig_loss

        d, t = st.get("d"), _scalar(st.get("t"))
        old_dirs, old_stps, ro = st.get("old_dirs"), st.get("old_stps"), st.get("ro")
        h_diag, prev_flat_grad, prev_loss = st.get("H_diag"), st.get("prev_flat_grad"), st.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            st["n_iter"] += 1
            if st["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro, h_diag = [], [], [], 1
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = y.dot(s)
                if float(ys) > 1e-10:  # curvature condition: keep the pair, dropping the oldest beyond history_size
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / y.dot(y)
                # two-loop recursion: d = -H g with H the L-BFGS inverse Hessian estimate
                if "al" not in st:
                    st["al"] = [None] * history_size
                al = st["al"]
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = q.mul(h_diag)
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(d) * ro[i]
                    d.add_(old_stps[i], alpha=al[i] - be_i)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                _C.copy_(prev_flat_grad, flat_grad)
            prev_loss = loss

            t = min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr if st["n_iter"] == 1 else lr
            gtd = float(flat_grad.dot(d))
            if gtd > -tol_change:  # not a descent direction any more
                break

            ls_evals = 0
            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError(f"only 'strong_wolfe' is supported as LBFGS line_search_fn, got "
                                       f"{line_search!r}")
                x0 = [p.clone() for p in self._params]
                loss, flat_grad, t, ls_evals = _strong_wolfe(
                    lambda step: self._evaluate(closure, x0, step, d), t, d, loss, flat_grad, gtd,
                    max_ls=max_eval - evals)
                self._add_to_params(t, d)
                opt_cond = float(flat_grad.abs().max()) <= tol_grad
            else:
                self._add_to_params(t, d)
                opt_cond = False
                if n_iter != max_iter:  # the last iteration's point is not evaluated (the next step does)
                    loss = float(closure())
                    loss = -loss if maximize else loss
                    flat_grad = self._flat_grad()
                    opt_cond = float(flat_grad.abs().max()) <= tol_grad
                    ls_evals = 1
            evals += ls_evals
            st["func_evals"] += ls_evals

            if n_iter == max_iter or evals >= max_eval or opt_cond:
                break
            if abs(t) * float(d.abs().max()) <= tol_change or abs(loss - prev_loss) < tol_change:
                break  # no progress

        st.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                  prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    # ---- state_dict ------------------------------------------------------------------------------------------
    def load_state_dict(self, state_dict):
        """As Optimizer.load_state_dict, for LBFGS's state: flat vectors and lists of them (copied to the first
        parameter's dtype and device, 0-dim ones included: PyTorch keeps H_diag, ro and al so), and numbers."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("load_state_dict: expected a dict with 'state' and 'param_groups' (the result of "
                             "optimizer.state_dict())")
        groups = state_dict["param_groups"]
        if len(groups) != 1 or len(groups[0]["params"]) != len(self._params):
            raise ValueError(f"loaded state dict has {len(groups)} parameter group(s) with "
                             f"{[len(g['params']) for g in groups]} parameters; this LBFGS has one group of "
                             f"{len(self._params)}")
        id_map = dict(zip(groups[0]["params"], self._params))
        p0 = self._params[0]

        def own(v):
            if _is_tensor(v):
                with category("optimizer"):
                    return v.detach().to(device=p0._device, dtype=p0.dtype).clone()
            if isinstance(v, list):
                return [own(x) for x in v]
            return v

        new_state = {}
        for key, st in state_dict["state"].items():
            if key not in id_map:
                raise ValueError(f"loaded state dict has state for parameter {key!r}, which no parameter group "
                                 f"lists")
            new_state[id_map[key]] = {k: (int(float(v)) if k in ("func_evals", "n_iter") and _is_tensor(v)
                                          else own(v)) for k, v in st.items()}
        self.state.clear()
        self.state.update(new_state)
        g = dict(groups[0])
        g["params"] = self._params
        self.param_groups = [g]
