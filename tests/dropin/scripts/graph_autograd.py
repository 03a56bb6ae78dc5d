"""Autograd as research and tutorial code uses it, written as those repositories write it:
- a two-layer GCN (Kipf & Welling's normalisation, PyG-style message passing) whose first layer aggregates with
  torch.zeros(n, d).index_add_(0, col, msg) and whose second with scatter_add_, trained with Adam;
- makemore's manual backprop exercise: dlogits = softmax(logits) with 1 subtracted at [range(n), Yb], / n, checked
  against autograd's logits.grad (retain_grad);
- users' torch.autograd.Function: one with two outputs of which only one is used (its backward gets zeros for the
  other) and ctx attributes, and EfficientNet-PyTorch's MemoryEfficientSwish inside a WGAN-GP-style gradient
  penalty (torch.autograd.grad(create_graph=True) through the user's backward, then the penalty's backward: a
  double backward through it);
- a SIREN (sin activations, w0 = 30 on the first layer) fitted to a Poisson equation, the Laplacian from the SIREN
  repository's gradient / divergence (autograd.grad with create_graph=True, twice);
- Grad-CAM on a small CNN from register_forward_hook and register_full_backward_hook on its last convolution;
- per-sample gradients with torch.func (vmap(grad(loss_fn), in_dims=(None, 0, 0)) over functional_call), used for a
  DP-SGD-style clipped update;
- a checkpoint round trip: torch.save of a dict with the model's and the optimizer's state, torch.load(...,
  weights_only=True) into a fresh model and optimizer, one more step.
Data from NumPy; --init/--out/--double are the conformance suite's knobs."""
import argparse
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

# ---------------------------------------------------------------------------------------------------- GCN


def gcn_norm(edge_index, num_nodes):
    """Symmetric normalisation with self loops: deg^-1/2[row] * deg^-1/2[col] per edge."""
    loops = torch.arange(num_nodes).unsqueeze(0).repeat(2, 1)
    edge_index = torch.cat([edge_index, loops], dim=1)
    row, col = edge_index
    deg = torch.zeros(num_nodes).index_add_(0, col, torch.ones(col.size(0)))
    deg_inv_sqrt = deg.pow(-0.5)
    deg_inv_sqrt[deg_inv_sqrt == float("inf")] = 0
    return edge_index, deg_inv_sqrt[row] * deg_inv_sqrt[col]


class GCNConvIndexAdd(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels, bias=False)
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def forward(self, x, edge_index, norm):
        x = self.lin(x)
        row, col = edge_index
        msg = norm.view(-1, 1) * x[row]
        out = torch.zeros(x.size(0), x.size(1)).index_add_(0, col, msg)
        return out + self.bias


class GCNConvScatter(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.lin = nn.Linear(in_channels, out_channels)

    def forward(self, x, edge_index, norm):
        x = self.lin(x)
        row, col = edge_index
        msg = x.index_select(0, row) * norm.unsqueeze(-1)
        index = col.unsqueeze(-1).expand_as(msg)
        return x.new_zeros(x.shape).scatter_add_(0, index, msg)


class GCN(nn.Module):
    def __init__(self, in_channels=5, hidden=8, classes=3):
        super().__init__()
        self.conv1 = GCNConvIndexAdd(in_channels, hidden)
        self.conv2 = GCNConvScatter(hidden, classes)

    def forward(self, x, edge_index, norm):
        x = F.relu(self.conv1(x, edge_index, norm))
        return F.log_softmax(self.conv2(x, edge_index, norm), dim=1)


# ------------------------------------------------------------------------------------- users' Functions

SEEN = {}


class ScaleAndRowSum(torch.autograd.Function):
    """Two outputs: x * scale and x's row sums; callers use only the first."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        ctx.save_for_backward(x)
        return x * scale, x.sum(dim=1)

    @staticmethod
    def backward(ctx, grad_scaled, grad_rowsum):
        (x,) = ctx.saved_tensors
        SEEN["unused_grad_is_tensor"] = isinstance(grad_rowsum, torch.Tensor)
        if isinstance(grad_rowsum, torch.Tensor):
            SEEN["unused_grad_abs_sum"] = float(grad_rowsum.abs().sum())
            SEEN["unused_grad_shape"] = tuple(grad_rowsum.shape)
        grad_x = grad_scaled * ctx.scale + grad_rowsum.unsqueeze(1).expand_as(x)
        return grad_x, None


class SwishImplementation(torch.autograd.Function):
    """EfficientNet-PyTorch's MemoryEfficientSwish."""

    @staticmethod
    def forward(ctx, i):
        result = i * torch.sigmoid(i)
        ctx.save_for_backward(i)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        i = ctx.saved_tensors[0]
        sigmoid_i = torch.sigmoid(i)
        return grad_output * (sigmoid_i * (1 + i * (1 - sigmoid_i)))


class MemoryEfficientSwish(nn.Module):
    def forward(self, x):
        return SwishImplementation.apply(x)


class Critic(nn.Module):
    def __init__(self, d=4, h=8):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.act = MemoryEfficientSwish()
        self.fc2 = nn.Linear(h, 1)

    def forward(self, x):
        scaled, _ = ScaleAndRowSum.apply(self.fc1(x), 0.5)
        return self.fc2(self.act(scaled)).view(-1)


# ---------------------------------------------------------------------------------------------------- SIREN


class SineLayer(nn.Module):
    def __init__(self, in_features, out_features, is_first=False, omega_0=30.0):
        super().__init__()
        self.omega_0, self.is_first, self.in_features = omega_0, is_first, in_features
        self.linear = nn.Linear(in_features, out_features)
        with torch.no_grad():
            if is_first:
                self.linear.weight.uniform_(-1 / in_features, 1 / in_features)
            else:
                bound = np.sqrt(6 / in_features) / omega_0
                self.linear.weight.uniform_(-bound, bound)

    def forward(self, x):
        return torch.sin(self.omega_0 * self.linear(x))


class Siren(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.net = nn.Sequential(SineLayer(2, hidden, is_first=True), SineLayer(hidden, hidden),
                                 nn.Linear(hidden, 1))

    def forward(self, coords):
        coords = coords.clone().detach().requires_grad_(True)  # allows to take derivative w.r.t. input
        return self.net(coords), coords


def gradient(y, x, grad_outputs=None):
    if grad_outputs is None:
        grad_outputs = torch.ones_like(y)
    return torch.autograd.grad(y, [x], grad_outputs=grad_outputs, create_graph=True)[0]


def divergence(y, x):
    div = 0.
    for i in range(y.shape[-1]):
        div += torch.autograd.grad(y[..., i], x, torch.ones_like(y[..., i]), create_graph=True)[0][..., i:i + 1]
    return div


def laplace(y, x):
    return divergence(gradient(y, x), x)


# ------------------------------------------------------------------------------------------------ Grad-CAM


class SmallCNN(nn.Module):
    def __init__(self, classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 8, 3, padding=1)
        self.fc = nn.Linear(8, classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(x, 2)
        x = F.relu(self.conv2(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class GradCAM:
    def __init__(self, model, target_layer):
        self.model, self.activations, self.gradients = model, None, None
        self.handles = [target_layer.register_forward_hook(self.save_activation),
                        target_layer.register_full_backward_hook(self.save_gradient)]

    def save_activation(self, module, input, output):
        self.activations = output.detach()

    def save_gradient(self, module, grad_input, grad_output):
        self.gradients = grad_output[0].detach()

    def __call__(self, x, target_category):
        self.model.zero_grad()
        output = self.model(x)
        score = output[torch.arange(x.size(0)), target_category].sum()
        score.backward()
        weights = self.gradients.mean(dim=(2, 3), keepdim=True)
        cam = F.relu((weights * self.activations).sum(dim=1, keepdim=True))
        cam = F.interpolate(cam, size=x.shape[-2:], mode="bilinear", align_corners=False)
        flat = cam.flatten(1)
        lo, hi = flat.min(dim=1, keepdim=True)[0], flat.max(dim=1, keepdim=True)[0]
        cam = ((flat - lo) / (hi - lo + 1e-7)).view_as(cam)
        return output, cam.squeeze(1)

    def release(self):
        for h in self.handles:
            h.remove()


# -------------------------------------------------------------------------------------------------- models


class MLP(nn.Module):
    def __init__(self, d=4, h=8, classes=3):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, classes)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


class Models(nn.Module):
    def __init__(self):
        super().__init__()
        self.gcn = GCN()
        self.bigram = nn.Linear(6, 7)  # makemore: features -> logits over a vocabulary of 7
        self.critic = Critic()
        self.siren = Siren()
        self.cnn = SmallCNN()
        self.mlp = MLP()


def arrays(prefix, module):
    return {f"{prefix}/{k}": v.detach().cpu().double().numpy() for k, v in module.state_dict().items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()

    torch.manual_seed(0)
    rng = np.random.default_rng(3)
    models = Models()
    try:
        with np.load(opt.init) as z:
            models.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files})
    except FileNotFoundError:
        np.savez(opt.init, **{k: v.detach().cpu().numpy() for k, v in models.state_dict().items()})
    if opt.double:
        torch.set_default_dtype(torch.float64)  # torch.zeros(n, d) in the GCN follows it
        models.double()
    dtype = torch.get_default_dtype()
    result, first = {}, {}

    # 1. GCN on a small graph (edges both ways), Adam
    n = 7
    src = np.array([0, 1, 1, 2, 3, 4, 4, 5, 6, 2])
    dst = np.array([1, 2, 3, 3, 4, 5, 6, 6, 0, 5])
    edge_index = torch.from_numpy(np.stack([np.concatenate([src, dst]), np.concatenate([dst, src])]))
    edge_index, norm = gcn_norm(edge_index, n)
    x = torch.from_numpy(rng.standard_normal((n, 5))).to(dtype)
    y = torch.from_numpy(rng.integers(0, 3, n))
    train_mask = torch.from_numpy(np.array([1, 1, 0, 1, 1, 0, 1], dtype=bool))
    gcn = models.gcn
    optimizer = torch.optim.Adam(gcn.parameters(), lr=0.01, weight_decay=5e-4)
    losses = []
    for step in range(opt.steps):
        gcn.train()
        optimizer.zero_grad()
        out = gcn(x, edge_index, norm)
        loss = F.nll_loss(out[train_mask], y[train_mask])
        loss.backward()
        if step == 0:
            first["step0/gcn_loss"] = np.array(loss.item())
            first.update({f"grad/gcn/{k}": p.grad.detach().double().numpy() for k, p in gcn.named_parameters()})
        optimizer.step()
        losses.append(loss.item())
    gcn.eval()
    with torch.no_grad():
        eval_out = gcn(x, edge_index, norm)
        pred = eval_out.argmax(dim=1)
    result["gcn/losses"] = np.array(losses)
    result["gcn/norm"] = norm.double().numpy()
    result["gcn/eval_out"] = eval_out.double().numpy()
    result["gcn/acc"] = np.array(int((pred[~train_mask] == y[~train_mask]).sum()) / int((~train_mask).sum()))

    # 7. checkpoint round trip of the GCN and its Adam: save, load (weights_only) into fresh ones, one more step
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "checkpoint.pt")
        torch.save({"epoch": opt.steps, "model_state_dict": gcn.state_dict(),
                    "optimizer_state_dict": optimizer.state_dict(), "loss": losses[-1]}, path)
        checkpoint = torch.load(path, weights_only=True)
    resumed = GCN().to(dtype)
    resumed.load_state_dict(checkpoint["model_state_dict"])
    resumed_opt = torch.optim.Adam(resumed.parameters(), lr=0.01, weight_decay=5e-4)
    resumed_opt.load_state_dict(checkpoint["optimizer_state_dict"])
    resumed.train()
    resumed_opt.zero_grad()
    loss = F.nll_loss(resumed(x, edge_index, norm)[train_mask], y[train_mask])
    loss.backward()
    resumed_opt.step()
    result["ckpt/epoch"] = np.array(checkpoint["epoch"])
    result["ckpt/saved_loss"] = np.array(checkpoint["loss"])
    result["ckpt/loss"] = np.array(loss.item())
    result["ckpt/step"] = np.array(float(resumed_opt.state_dict()["state"][0]["step"]))
    result.update(arrays("ckpt/state", resumed))
    result.update({f"ckpt/exp_avg_sq/{i}": s["exp_avg_sq"].detach().double().numpy()
                   for i, s in resumed_opt.state_dict()["state"].items()})

    # 2. makemore: manual backprop through cross_entropy
    bs = 8
    Xb = torch.from_numpy(rng.standard_normal((bs, 6))).to(dtype)
    Yb = torch.from_numpy(rng.integers(0, 7, bs))
    logits = models.bigram(Xb)
    logits.retain_grad()
    loss = F.cross_entropy(logits, Yb)
    loss.backward()
    dlogits = F.softmax(logits, 1) * 1.0
    dlogits[range(bs), Yb] -= 1
    dlogits /= bs
    dW = (Xb.T @ dlogits).T
    db = dlogits.sum(0)
    result["makemore/loss"] = np.array(loss.item())
    result["makemore/dlogits"] = dlogits.detach().double().numpy()
    result["makemore/logits_grad"] = logits.grad.double().numpy()
    result["makemore/dW"] = dW.detach().double().numpy()
    result["makemore/W_grad"] = models.bigram.weight.grad.double().numpy()
    result["makemore/db_close"] = np.array(float(torch.allclose(db, models.bigram.bias.grad)))
    result["makemore/dlogits_close"] = np.array(float(torch.allclose(dlogits, logits.grad)))

    # 3. the users' Functions: a gradient penalty through them (double backward), Adam
    critic = models.critic
    critic_opt = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    real = torch.from_numpy(rng.standard_normal((opt.steps, 6, 4))).to(dtype)
    fake = torch.from_numpy(rng.standard_normal((opt.steps, 6, 4)) * 0.5 + 1.0).to(dtype)
    alpha = torch.from_numpy(rng.random((opt.steps, 6, 1))).to(dtype)
    c_losses, gps = [], []
    for step in range(opt.steps):
        critic_opt.zero_grad()
        interpolates = (alpha[step] * real[step] + (1 - alpha[step]) * fake[step]).requires_grad_(True)
        d_interpolates = critic(interpolates)
        gradients = torch.autograd.grad(outputs=d_interpolates, inputs=interpolates,
                                        grad_outputs=torch.ones_like(d_interpolates),
                                        create_graph=True, retain_graph=True)[0]
        gp = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
        c_loss = -critic(real[step]).mean() + critic(fake[step]).mean() + 10.0 * gp
        c_loss.backward()
        if step == 0:
            first["step0/critic_loss"] = np.array(c_loss.item())
            first["step0/critic_input_grad"] = gradients.detach().double().numpy()
            first.update({f"grad/critic/{k}": p.grad.detach().double().numpy()
                          for k, p in critic.named_parameters()})
        critic_opt.step()
        c_losses.append(c_loss.item())
        gps.append(gp.item())
    result["critic/losses"] = np.array(c_losses)
    result["critic/gp"] = np.array(gps)
    result["function/unused_grad_is_tensor"] = np.array(float(SEEN.get("unused_grad_is_tensor", False)))
    result["function/unused_grad_abs_sum"] = np.array(SEEN.get("unused_grad_abs_sum", -1.0))
    result["function/unused_grad_shape"] = np.array(SEEN.get("unused_grad_shape", ()))

    # 4. SIREN fitted to a Poisson equation: laplace(u) = f on 16 points
    siren = models.siren
    siren_opt = torch.optim.Adam(siren.parameters(), lr=1e-4)
    coords = torch.from_numpy(rng.uniform(-1, 1, (16, 2))).to(dtype)
    f = -2 * np.pi ** 2 * torch.sin(np.pi * coords[:, :1]) * torch.sin(np.pi * coords[:, 1:])
    p_losses = []
    for step in range(opt.steps):
        model_output, model_input = siren(coords)
        lap = laplace(model_output, model_input)
        p_loss = ((lap - f) ** 2).mean()
        siren_opt.zero_grad()
        p_loss.backward()
        if step == 0:
            first["step0/poisson_laplacian"] = lap.detach().double().numpy()
            first["step0/poisson_loss"] = np.array(p_loss.item())
            first.update({f"grad/siren/{k}": p.grad.detach().double().numpy()
                          for k, p in siren.named_parameters() if p.grad is not None})
            result["siren/params_without_grad"] = np.array([float(p.grad is None) for p in siren.parameters()])
        siren_opt.step()
        p_losses.append(p_loss.item())
    result["siren/losses"] = np.array(p_losses)
    with torch.no_grad():
        result["siren/output"] = siren.net(coords).double().numpy()

    # 5. Grad-CAM on the CNN's last convolution
    cnn = models.cnn
    cnn.eval()
    images = torch.from_numpy(rng.uniform(-1, 1, (2, 3, 8, 8))).to(dtype)
    cam_extractor = GradCAM(cnn, cnn.conv2)
    output, cam = cam_extractor(images, torch.tensor([1, 3]))
    cam_extractor.release()
    result["gradcam/output"] = output.detach().double().numpy()
    result["gradcam/activations"] = cam_extractor.activations.double().numpy()
    result["gradcam/gradients"] = cam_extractor.gradients.double().numpy()
    result["gradcam/cam"] = cam.detach().double().numpy()
    result["gradcam/conv2_weight_grad"] = cnn.conv2.weight.grad.double().numpy()

    # 6. per-sample gradients with torch.func, a DP-SGD-style clipped, averaged update
    mlp = models.mlp
    params = {k: v.detach() for k, v in mlp.named_parameters()}
    xs = torch.from_numpy(rng.standard_normal((5, 4))).to(dtype)
    ys = torch.from_numpy(rng.integers(0, 3, 5))

    def loss_fn(params, sample, target):
        prediction = functional_call(mlp, params, (sample.unsqueeze(0),))
        return F.cross_entropy(prediction, target.unsqueeze(0))

    per_sample_grads = vmap(grad(loss_fn), in_dims=(None, 0, 0))(params, xs, ys)
    result.update({f"per_sample/{k}": g.double().numpy() for k, g in per_sample_grads.items()})
    norms = torch.stack([g.flatten(1).norm(dim=1) for g in per_sample_grads.values()], dim=1).norm(dim=1)
    factor = (1.0 / (norms / 0.5).clamp(min=1.0)).view(-1, 1)
    with torch.no_grad():
        for k, p in mlp.named_parameters():
            g = per_sample_grads[k]
            p -= 0.1 * (g * factor.view(-1, *([1] * (g.dim() - 1)))).mean(0)
    result["per_sample/norms"] = norms.double().numpy()
    result.update(arrays("per_sample/state", mlp))

    result.update(first)
    result.update(arrays("state", models))
    for k, v in sorted(result.items()):
        if v.size <= 4:
            print(k, v)
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
