"""Complex, spectral and sparse tensors, and in-place view writes, as research code writes them:
- a LLaMA attention block with Meta's complex rotary embedding (torch.polar, view_as_complex, view_as_real; the
  freqs_cis buffer moved with the model), trained with AdamW;
- a Fourier Neural Operator layer (neuraloperator's SpectralConv2d: complex Parameters, torch.fft.rfft2 / irfft2,
  complex einsum into a slice of a complex zeros) with a multi-resolution STFT loss (torch.stft) on its output;
- Kipf's pygcn: a sparse normalised adjacency (torch.sparse.FloatTensor) multiplied with torch.spmm, Adam;
- Barlow Twins' loss, whose diagonal and off-diagonal terms write in place into views of the cross-correlation
  (torch.diagonal(c).add_(-1).pow_(2)), and an EMA whose weights are applied and restored through `p.data =`.
Data from NumPy; --init/--out/--double are the conformance suite's knobs."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    shape = [d if i == 1 or i == xq_.ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Attention(nn.Module):
    def __init__(self, dim=16, heads=2, seq=8):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq, self.wk = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.wv, self.wo = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.freqs_cis = precompute_freqs_cis(self.head_dim, seq * 2)

    def forward(self, x):
        b, n, _ = x.shape
        q = self.wq(x).view(b, n, self.heads, self.head_dim)
        k = self.wk(x).view(b, n, self.heads, self.head_dim)
        v = self.wv(x).view(b, n, self.heads, self.head_dim)
        self.freqs_cis = self.freqs_cis.to(x.device)
        q, k = apply_rotary_emb(q, k, self.freqs_cis[:n])
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = torch.matmul(q, k.transpose(2, 3)) / self.head_dim ** 0.5
        mask = torch.full((n, n), float("-inf")).triu(1)
        out = torch.matmul(F.softmax((scores + mask).float(), dim=-1).type_as(q), v)
        return self.wo(out.transpose(1, 2).contiguous().view(b, n, -1))


class SpectralConv2d(nn.Module):
    def __init__(self, cin, cout, modes):
        super().__init__()
        self.cout, self.modes = cout, modes
        scale = 1 / (cin * cout)
        self.weights1 = nn.Parameter(scale * torch.rand(cin, cout, modes, modes, dtype=torch.cfloat))
        self.weights2 = nn.Parameter(scale * torch.rand(cin, cout, modes, modes, dtype=torch.cfloat))

    def forward(self, x):
        m = self.modes
        x_ft = torch.fft.rfft2(x)
        out_ft = torch.zeros(x.shape[0], self.cout, x.size(-2), x.size(-1) // 2 + 1, dtype=x_ft.dtype,
                             device=x.device)
        out_ft[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, :m, :m], self.weights1)
        out_ft[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", x_ft[:, :, -m:, :m], self.weights2)
        return torch.fft.irfft2(out_ft, s=(x.size(-2), x.size(-1)))


class FNO(nn.Module):
    def __init__(self):
        super().__init__()
        self.spectral, self.pointwise = SpectralConv2d(3, 3, 3), nn.Conv2d(3, 3, 1)

    def forward(self, x):
        return F.gelu(self.spectral(x) + self.pointwise(x))


def stft_loss(y, target):
    loss = 0
    for n_fft in (16, 32):
        window = torch.hann_window(n_fft, dtype=y.dtype)
        sy = torch.stft(y, n_fft, n_fft // 4, window=window, return_complex=True).abs()
        st = torch.stft(target, n_fft, n_fft // 4, window=window, return_complex=True).abs()
        loss = loss + torch.norm(st - sy, p="fro") / torch.norm(st, p="fro") + F.l1_loss(torch.log(sy + 1e-5),
                                                                                        torch.log(st + 1e-5))
    return loss


class GraphConvolution(nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.weight = nn.Parameter(torch.FloatTensor(fin, fout))
        self.bias = nn.Parameter(torch.FloatTensor(fout))
        nn.init.uniform_(self.weight, -0.5, 0.5)
        nn.init.zeros_(self.bias)

    def forward(self, x, adj):
        return torch.spmm(adj, torch.mm(x, self.weight)) + self.bias


class Models(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()
        self.fno = FNO()
        self.gc1, self.gc2 = GraphConvolution(5, 8), GraphConvolution(8, 3)
        self.proj = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 8))


def off_diagonal(x):
    n, m = x.shape
    return x.flatten()[:-1].view(n - 1, n + 1)[:, 1:].flatten()


def real_view(v):
    return torch.view_as_real(v) if v.is_complex() else v


def arrays(prefix, module):
    return {f"{prefix}/{k}": real_view(v.detach()).cpu().double().numpy() for k, v in module.state_dict().items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()

    torch.manual_seed(0)
    rng = np.random.default_rng(5)
    models = Models()
    params = dict(models.named_parameters())
    params.update(dict(models.named_buffers()))
    try:
        with np.load(opt.init) as z, torch.no_grad():
            for k in z.files:  # complex parameters travel as their real pairs
                real_view(params[k]).copy_(torch.from_numpy(z[k]))
    except FileNotFoundError:
        np.savez(opt.init, **{k: real_view(v.detach()).numpy() for k, v in params.items()})
    if opt.double:
        torch.set_default_dtype(torch.float64)
        models.double()
        for name in ("weights1", "weights2"):  # PyTorch's Module.double() leaves complex parameters alone
            w = getattr(models.fno.spectral, name)
            if w.dtype == torch.complex64:
                w.data = w.data.to(torch.complex128)
    dtype = torch.get_default_dtype()
    result = {}

    # 1. LLaMA attention with the complex rotary embedding
    attn = models.attn
    x = torch.from_numpy(rng.standard_normal((2, 6, 16))).to(dtype)
    target = torch.from_numpy(rng.standard_normal((2, 6, 16))).to(dtype)
    optimizer = torch.optim.AdamW(attn.parameters(), lr=0.01)
    for step in range(opt.steps):
        optimizer.zero_grad()
        loss = F.mse_loss(attn(x), target)
        loss.backward()
        optimizer.step()
        result[f"attn/loss{step}"] = np.array(loss.item())

    # 2. FNO with an STFT loss on its flattened output
    fno = models.fno
    u = torch.from_numpy(rng.standard_normal((2, 3, 8, 8))).to(dtype)
    optimizer = torch.optim.Adam(fno.parameters(), lr=0.01)
    for step in range(opt.steps):
        optimizer.zero_grad()
        y = fno(u)
        loss = F.mse_loss(y, u) + 0.1 * stft_loss(y.reshape(2, -1), u.reshape(2, -1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(fno.parameters(), 1.0)
        optimizer.step()
        result[f"fno/loss{step}"] = np.array(loss.item())

    # 3. pygcn on a sparse adjacency
    n = 9
    a = (rng.random((n, n)) < 0.3).astype(np.float64)
    a = np.maximum(a, a.T) + np.eye(n)
    a = a / a.sum(1, keepdims=True)
    rows, cols = np.nonzero(a)
    adj = torch.sparse.FloatTensor(torch.from_numpy(np.vstack((rows, cols)).astype(np.int64)),
                                   torch.from_numpy(a[rows, cols]).to(dtype), torch.Size(a.shape))
    feats = torch.from_numpy(rng.standard_normal((n, 5))).to(dtype)
    labels = torch.from_numpy(rng.integers(0, 3, n))
    gcn_params = list(models.gc1.parameters()) + list(models.gc2.parameters())
    optimizer = torch.optim.Adam(gcn_params, lr=0.01, weight_decay=5e-4)
    for step in range(opt.steps):
        optimizer.zero_grad()
        h = F.relu(models.gc1(feats, adj))
        out = F.log_softmax(models.gc2(h, adj), dim=1)
        loss = F.nll_loss(out[:6], labels[:6])
        loss.backward()
        optimizer.step()
        result[f"gcn/loss{step}"] = np.array(loss.item())

    # 4. Barlow Twins with an EMA of the projector applied and restored through .data
    proj = models.proj
    z1_in = torch.from_numpy(rng.standard_normal((8, 6))).to(dtype)
    z2_in = z1_in + 0.1 * torch.from_numpy(rng.standard_normal((8, 6))).to(dtype)
    shadow = {k: v.detach().clone() for k, v in proj.named_parameters()}
    optimizer = torch.optim.SGD(proj.parameters(), lr=0.05, momentum=0.9)
    for step in range(opt.steps):
        optimizer.zero_grad()
        z1, z2 = proj(z1_in), proj(z2_in)
        z1 = (z1 - z1.mean(0)) / z1.std(0)
        z2 = (z2 - z2.mean(0)) / z2.std(0)
        c = z1.T @ z2 / z1.shape[0]
        on_diag = torch.diagonal(c).add_(-1).pow_(2).sum()
        off_diag = off_diagonal(c).pow_(2).sum()
        loss = on_diag + 0.005 * off_diag
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for k, p in proj.named_parameters():
                shadow[k].mul_(0.9).add_(p.detach(), alpha=0.1)
        result[f"barlow/loss{step}"] = np.array(loss.item())
    backup = {k: p.data for k, p in proj.named_parameters()}
    for k, p in proj.named_parameters():
        p.data = shadow[k]
    proj.eval()
    result["barlow/ema_output"] = proj(z1_in).detach().double().numpy()
    for k, p in proj.named_parameters():
        p.data = backup[k]
    result["barlow/restored_output"] = proj(z1_in).detach().double().numpy()

    result.update(arrays("state", models))
    for k, v in sorted(result.items()):
        if v.size <= 4:
            print(k, v)
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
