"""WGAN-GP in the style of the common implementations (Gulrajani et al.'s recipe as PyTorch repositories write it): a
DCGAN-shaped generator (ConvTranspose2d, BatchNorm2d, ReLU, Tanh) and a critic without batch norm (Conv2d,
InstanceNorm2d with affine parameters, LeakyReLU), Adam with betas (0.5, 0.9), n_critic critic steps per generator
step, and the gradient penalty from torch.autograd.grad(..., create_graph=True, retain_graph=True) on random
interpolates. Noise and the interpolation weights come from NumPy (two libraries' generators never draw the same
numbers). --init/--out/--double are the conformance suite's knobs."""
import argparse

import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn

NZ = 8


class Generator(nn.Module):
    def __init__(self, nz=NZ, ngf=8):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.main(z)


class Critic(nn.Module):
    def __init__(self, ndf=8):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(1, ndf, 4, 2, 1), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1), nn.InstanceNorm2d(ndf * 2, affine=True), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf * 2, 1, 4, 1, 0))

    def forward(self, x):
        return self.main(x).view(-1)


def compute_gradient_penalty(critic, real_samples, fake_samples, alpha):
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = critic(interpolates)
    fake = torch.ones(real_samples.size(0), dtype=real_samples.dtype, device=real_samples.device)
    gradients = autograd.grad(outputs=d_interpolates, inputs=interpolates, grad_outputs=fake, create_graph=True,
                              retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean()


class Models(nn.Module):
    def __init__(self):
        super().__init__()
        self.G = Generator()
        self.D = Critic()


def main():
    parser = argparse.ArgumentParser(description="WGAN-GP (synthetic data)")
    parser.add_argument("--iters", type=int, default=3)
    parser.add_argument("--n_critic", type=int, default=2)
    parser.add_argument("--lambda_gp", type=float, default=10.0)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    dtype = np.float64 if opt.double else np.float32
    models = Models().to(device)
    try:
        with np.load(opt.init) as z:
            models.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files})
    except FileNotFoundError:
        np.savez(opt.init, **{k: v.detach().cpu().numpy() for k, v in models.state_dict().items()})
    if opt.double:
        models.double()
    generator, critic = models.G, models.D
    optimizer_G = torch.optim.Adam(generator.parameters(), lr=1e-3, betas=(0.5, 0.9))
    optimizer_D = torch.optim.Adam(critic.parameters(), lr=1e-3, betas=(0.5, 0.9))
    real_data = torch.from_numpy(np.tanh(rng.standard_normal((8, 1, 16, 16))).astype(dtype))

    d_losses, g_losses, gps, first = [], [], [], {}
    for it in range(opt.iters):
        for _ in range(opt.n_critic):
            real_imgs = real_data.to(device)
            z = torch.from_numpy(rng.standard_normal((8, NZ, 1, 1)).astype(dtype)).to(device)
            alpha = torch.from_numpy(rng.random((8, 1, 1, 1)).astype(dtype)).to(device)
            optimizer_D.zero_grad()
            fake_imgs = generator(z)
            real_validity = critic(real_imgs)
            fake_validity = critic(fake_imgs.detach())
            gradient_penalty = compute_gradient_penalty(critic, real_imgs.data, fake_imgs.data, alpha)
            d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + opt.lambda_gp * gradient_penalty
            d_loss.backward()
            if not first:  # for the test's float64 diagnosis: step 1's loss and gradients, before any step
                first = {"step0/loss": np.array(d_loss.item())}
                first.update({f"grad/{k}": p.grad.detach().cpu().double().numpy()
                              for k, p in models.named_parameters() if p.grad is not None})
            optimizer_D.step()
            d_losses.append(d_loss.item())
            gps.append(gradient_penalty.item())
        optimizer_G.zero_grad()
        z = torch.from_numpy(rng.standard_normal((8, NZ, 1, 1)).astype(dtype)).to(device)
        g_loss = -torch.mean(critic(generator(z)))
        g_loss.backward()
        optimizer_G.step()
        g_losses.append(g_loss.item())
        print(f"[iter {it}] [D loss: {d_losses[-1]:.4f}] [G loss: {g_loss.item():.4f}] [GP: {gps[-1]:.4f}]")

    result = {"d_losses": np.array(d_losses), "g_losses": np.array(g_losses), "gp": np.array(gps), **first}
    result.update({f"state/{k}": v.detach().cpu().double().numpy() for k, v in models.state_dict().items()})
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
