"""Samplers of the Poisson, binomial and gamma distributions, drawn from gpumemnet's generator (gm.rand), composed
of elementwise ops so they run on every device. They are rejection samplers over the whole tensor at once: each
round draws for the entries not yet accepted, and the loop asks the device whether any remain (a host sync per
round; a handful of rounds in all). On meta, which has no values, they return an empty tensor of the shape.

- Poisson: multiplication of uniforms (Knuth) below rate 10, Hormann's transformed rejection (PTRS) above.
- binomial: inversion (walking the pmf) where n * min(p, 1 - p) < 10, Hormann's BTRS above.
- gamma: Marsaglia and Tsang's squeeze method; shape < 1 via Gamma(shape + 1) * U^(1 / shape)."""

from . import _ops as T

__all__ = []


def _uniform(like):
    return T.rand(tuple(like.shape), dtype=T.float64, device=like.device)


def _rejection(shape_like, propose, skip=None):
    """Fill a float64 tensor by rounds of propose() -> (candidate, accepted) until every entry is accepted
    (entries where skip is True are left 0: their parameters are invalid and the caller fills them)."""
    out = T.zeros(tuple(shape_like.shape), dtype=T.float64, device=shape_like.device)
    done = T.zeros(tuple(shape_like.shape), dtype=T.bool_, device=shape_like.device)
    if skip is not None:
        done = done | skip
    while not bool(done.all()):
        cand, ok = propose()
        take = ok & ~done
        out = T.where(take, cand, out)
        done = done | take
    return out


def poisson(rate):
    """Poisson samples of rate (a float tensor, entries >= 0), as float64."""
    if rate.device.type == "meta" or rate.numel() == 0:
        return T.empty(tuple(rate.shape), dtype=T.float64, device=rate.device)
    with T.no_grad():
        lam = rate.detach().to(T.float64)
        if bool(((lam < 0) | (lam != lam)).any()):
            raise RuntimeError("invalid Poisson rate, expected rate to be non-negative (and not NaN)")
        huge = lam == float("inf")  # its sample is inf
        lam = T.where(huge, T.full_like(lam, 10.0), lam)
        small = lam < 10
        # Knuth: the number of uniforms whose running product stays above exp(-lam)
        lam_s = T.where(small, lam, T.zeros_like(lam))
        limit = T.exp(-lam_s)
        prod = T.ones_like(lam)
        k = T.zeros_like(lam)
        active = small.clone()
        while bool(active.any()):
            prod = prod * _uniform(lam)
            active = active & (prod > limit)
            k = k + active.to(T.float64)
        # PTRS for lam >= 10
        lam_b = T.where(small, T.full_like(lam, 10.0), lam)
        slam = lam_b.sqrt()
        loglam = lam_b.log()
        b = 0.931 + 2.53 * slam
        a = -0.059 + 0.02483 * b
        invalpha = 1.1239 + 1.1328 / (b - 3.4)
        vr = 0.9277 - 3.6224 / (b - 2)

        def propose():
            u = _uniform(lam) - 0.5
            v = _uniform(lam)
            us = 0.5 - u.abs()
            kk = ((2 * a / us + b) * u + lam_b + 0.43).floor()
            quick = (us >= 0.07) & (v <= vr)
            valid = (kk >= 0) & ~((us < 0.013) & (v > us))
            lhs = v.log() + invalpha.log() - (a / (us * us) + b).log()
            rhs = -lam_b + kk * loglam - T.lgamma(kk.clamp(min=0) + 1)
            return kk, small | quick | (valid & (lhs <= rhs))

        big = _rejection(lam, propose)
        return T.where(huge, T.full_like(lam, float("inf")), T.where(small, k, big))


def binomial(total_count, probs):
    """Binomial samples of total_count trials (float tensor of nonnegative integers) with success probability
    probs (same shape), as float64."""
    if probs.device.type == "meta" or probs.numel() == 0:
        return T.empty(tuple(probs.shape), dtype=T.float64, device=probs.device)
    with T.no_grad():
        n = total_count.detach().to(T.float64)
        p0 = probs.detach().to(T.float64)
        # invalid parameters (NaN, a negative or infinite count, probs outside [0, 1]) give NaN, not a hang
        bad = (n != n) | (n < 0) | (n == float("inf")) | (p0 != p0) | (p0 < 0) | (p0 > 1)
        n = T.where(bad, T.zeros_like(n), n)
        p0 = T.where(bad, T.zeros_like(p0), p0)
        flip = p0 > 0.5
        p = T.where(flip, 1 - p0, p0)  # p <= 1/2; the count of the other outcome when flipped
        small = n * p < 10
        # inversion: walk k = 0, 1, ... subtracting pmf(k) from a uniform
        p_s = T.where(small, p, T.zeros_like(p))
        ratio = p_s / (1 - p_s)
        pmf = T.where(small, T.exp(n * T.log1p(-p_s)), T.zeros_like(p))
        u = _uniform(p)
        k = T.zeros_like(p)
        active = small & (p_s > 0) & (n > 0)
        while bool(active.any()):
            u = u - pmf
            go = active & (u > 0) & (k < n)
            pmf = pmf * ratio * (n - k) / (k + 1)
            k = k + go.to(T.float64)
            active = go
        # BTRS where n p >= 10
        nb = T.where(small, T.full_like(n, 40.0), n)
        pb = T.where(small, T.full_like(p, 0.5), p)
        qb = 1 - pb
        spq = (nb * pb * qb).sqrt()
        b = 1.15 + 2.53 * spq
        a = -0.0873 + 0.0248 * b + 0.01 * pb
        c = nb * pb + 0.5
        vr = 0.92 - 4.2 / b
        alpha = (2.83 + 5.1 / b) * spq
        lpq = (pb / qb).log()
        m = ((nb + 1) * pb).floor()
        h = T.lgamma(m + 1) + T.lgamma(nb - m + 1)

        def propose():
            uu = _uniform(p) - 0.5
            v = _uniform(p)
            us = 0.5 - uu.abs()
            kk = ((2 * a / us + b) * uu + c).floor()
            inside = (kk >= 0) & (kk <= nb)
            quick = (us >= 0.07) & (v <= vr)
            kc = kk.clamp(min=0)
            kc = T.where(kc > nb, nb, kc)
            lhs = (v * alpha / (a / (us * us) + b)).log()
            rhs = h - T.lgamma(kc + 1) - T.lgamma(nb - kc + 1) + (kc - m) * lpq
            return kk, small | (inside & (quick | (lhs <= rhs)))

        big = _rejection(p, propose)
        out = T.where(small, k, big)
        out = T.where(flip, n - out, out)
        return T.where(bad, T.full_like(out, float("nan")), out)


def standard_gamma(concentration):
    """Gamma(concentration, 1) samples, as float64, positive (clamped to the smallest normal of float64)."""
    if concentration.device.type == "meta" or concentration.numel() == 0:
        return T.empty(tuple(concentration.shape), dtype=T.float64, device=concentration.device)
    with T.no_grad():
        alpha = concentration.detach().to(T.float64)
        # as PyTorch's: infinite shape draws inf, NaN or a shape <= 0 the smallest positive number
        infinite = alpha == float("inf")
        degenerate = (alpha != alpha) | (alpha <= 0) | infinite
        alpha = T.where(degenerate, T.ones_like(alpha), alpha)
        boost = alpha < 1
        a = T.where(boost, alpha + 1, alpha)
        d = a - 1.0 / 3.0
        c = 1.0 / (9.0 * d).sqrt()

        def propose():
            x = T.randn(tuple(alpha.shape), dtype=T.float64, device=alpha.device)
            v = 1 + c * x
            v3 = v * v * v
            u = _uniform(alpha)
            positive = v > 0
            v3s = T.where(positive, v3, T.ones_like(v3))
            xsq = x * x
            quick = u < 1 - 0.0331 * xsq * xsq
            slow = u.log() < 0.5 * xsq + d * (1 - v3s + v3s.log())
            return d * v3s, positive & (quick | slow)

        g = _rejection(alpha, propose)
        # Gamma(a) = Gamma(a + 1) * U^(1 / a) for a < 1, in log space (U^(1/a) underflows for small a)
        u = _uniform(alpha)
        log_g = g.log() + T.where(boost, u.log() / alpha, T.zeros_like(alpha))
        out = log_g.exp().clamp(min=T.finfo(T.float64).tiny)
        out = T.where(degenerate, T.full_like(out, T.finfo(T.float64).tiny), out)
        return T.where(infinite, T.full_like(out, float("inf")), out)
