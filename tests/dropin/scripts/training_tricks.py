"""The tricks CIFAR and timm-style training scripts add around a CNN, written as they write them: CoordConv
channels from meshgrid, sinusoidal position features, a spatial attention block with einsum and a tril mask,
exact GELU through erf, label smoothing with scatter_, mixup with randperm and lerp, an EMA of the weights with
lerp_ under no_grad, a cosine schedule, gradient clipping, the ImageNet example's top-k accuracy, and a confusion
matrix from bincount. Synthetic data; --init/--out/--double are the conformance suite's knobs."""
import argparse
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class AddCoords(nn.Module):
    """CoordConv: two channels holding each pixel's x and y in [-1, 1], plus a sinusoidal code of y."""

    def forward(self, x):
        b, _, h, w = x.shape
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, h, device=x.device, dtype=x.dtype),
                                torch.linspace(-1, 1, w, device=x.device, dtype=x.dtype), indexing="ij")
        code = torch.sin(ys * math.pi) * torch.cos(xs * math.pi / 2)
        extra = torch.stack([xs, ys, code]).unsqueeze(0).expand(b, 3, h, w)
        return torch.cat([x, extra], dim=1)


def gelu_exact(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class SpatialAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.qkv = nn.Conv2d(c, 3 * c, 1)
        self.scale = c ** -0.5

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv(x).reshape(b, 3, c, h * w).unbind(1)
        logits = torch.einsum("bci,bcj->bij", q, k) * self.scale
        mask = torch.tril(torch.ones(h * w, h * w, device=x.device), diagonal=h * w // 2) == 0
        attn = logits.masked_fill(mask, float("-inf")).softmax(dim=-1)
        return x + torch.einsum("bij,bcj->bci", attn, v).reshape(b, c, h, w)


class Net(nn.Module):
    def __init__(self, classes=5):
        super().__init__()
        self.coords = AddCoords()
        self.conv1 = nn.Conv2d(6, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.attn = SpatialAttention(8)
        self.conv2 = nn.Conv2d(8, 12, 3, stride=2, padding=1)
        self.fc = nn.Linear(12, classes)

    def forward(self, x):
        x = gelu_exact(self.bn1(self.conv1(self.coords(x))))
        x = self.attn(F.max_pool2d(x, 2))
        x = gelu_exact(self.conv2(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def smooth_cross_entropy(logits, target, smoothing=0.1):
    """Label smoothing as scripts write it: a one-hot by scatter_, mixed with the uniform distribution."""
    n = logits.size(-1)
    with torch.no_grad():
        true_dist = torch.full_like(logits, smoothing / (n - 1))
        true_dist.scatter_(1, target.unsqueeze(1), 1.0 - smoothing)
    log_probs = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    return torch.mean(torch.sum(-true_dist * log_probs, dim=-1))


def accuracy(output, target, topk=(1,)):
    """The ImageNet example's top-k accuracy."""
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    return [correct[:k].reshape(-1).float().sum(0, keepdim=True).mul_(100.0 / batch_size) for k in topk]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()

    torch.manual_seed(0)
    torch.autograd.set_detect_anomaly(False)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(1)
    dtype = torch.float64 if opt.double else torch.float32
    images = torch.from_numpy(rng.uniform(-1, 1, (opt.steps, 8, 3, 8, 8))).to(dtype)
    labels = torch.from_numpy(rng.integers(0, 5, (opt.steps, 8)))
    mix_perm = [torch.from_numpy(rng.permutation(8)) for _ in range(opt.steps)]

    model = Net().to(device)
    try:
        with np.load(opt.init) as z:
            model.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files})
    except FileNotFoundError:
        np.savez(opt.init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    model.to(dtype)
    ema = {k: v.detach().clone() for k, v in model.state_dict().items() if v.is_floating_point()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True, weight_decay=5e-4)
    base_lr, first, losses = 0.1, {}, []
    for step in range(opt.steps):
        lr = 0.5 * base_lr * (1.0 + math.cos(math.pi * step / opt.steps))
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = images[step].to(device), labels[step].to(device)
        lam = 0.7
        x = x.lerp(x[mix_perm[step].to(device)], 1.0 - lam)  # mixup of the inputs
        out = model(x)
        loss = lam * smooth_cross_entropy(out, y) + (1 - lam) * smooth_cross_entropy(out, y[mix_perm[step]])
        optimizer.zero_grad()
        loss.backward()
        if step == 0:
            first = {"step0/loss": np.array(loss.item())}
            first.update({f"grad/{k}": p.grad.detach().cpu().double().numpy() for k, p in model.named_parameters()})
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        with torch.no_grad():
            for k, v in model.state_dict().items():
                if k in ema:
                    ema[k].lerp_(v, 0.1)
        losses.append(loss.item())

    model.eval()
    with torch.no_grad():
        out = model(images.reshape(-1, 3, 8, 8).to(device))
        y = labels.reshape(-1).to(device)
        top1, top3 = accuracy(out, y, topk=(1, 3))
        pred = out.argmax(1)
        confusion = torch.bincount(5 * y + pred, minlength=25).reshape(5, 5)
        per_class = confusion.diag().float() / confusion.sum(1).clamp(min=1).float()
        seen = torch.unique(pred, return_counts=True)[1]
        log_odds = torch.log1p(out.softmax(1)).sum() + torch.expm1(out.clamp(max=1)).sum()
    result = {"losses": np.array(losses), "eval/top1": top1.cpu().double().numpy(),
              "eval/top3": top3.cpu().double().numpy(), "eval/confusion": confusion.cpu().numpy(),
              "eval/per_class": per_class.cpu().double().numpy(), "eval/seen": np.array(seen.numel()),
              "eval/log_odds": np.array(log_odds.item()), "eval/nonzero": np.array(confusion.count_nonzero().item()),
              **first}
    result.update({f"state/{k}": v.detach().cpu().double().numpy() for k, v in model.state_dict().items()})
    result.update({f"ema/{k}": v.detach().cpu().double().numpy() for k, v in ema.items()})
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
