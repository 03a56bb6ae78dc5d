"""A DCGAN in the style of the PyTorch examples repository's dcgan/main.py: a generator of transposed
convolutions, batch norm, ReLU and Tanh, a discriminator of strided convolutions, batch norm, LeakyReLU and
Sigmoid, the DCGAN weight init, BCELoss, and two Adam optimizers with betas=(0.5, 0.999). Synthetic "real" images
and noise from NumPy (the two libraries' generators differ); --init/--out/--double are the conformance suite's
knobs."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

nc, nz, ngf, ndf = 3, 16, 8, 8


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


class Generator(nn.Module):
    def __init__(self, ngpu=1):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is Z, going into a convolution
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 4),
            nn.ReLU(True),
            # state size. (ngf*4) x 4 x 4
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            # state size. (ngf*2) x 8 x 8
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            # state size. (ngf) x 16 x 16
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh()
            # state size. (nc) x 32 x 32
        )

    def forward(self, input):
        if input.is_cuda and self.ngpu > 1:
            return nn.parallel.data_parallel(self.main, input, range(self.ngpu))
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, ngpu=1):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            # input is (nc) x 32 x 32
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf) x 16 x 16
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*2) x 8 x 8
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * 4),
            nn.LeakyReLU(0.2, inplace=True),
            # state size. (ndf*4) x 4 x 4
            nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batchSize", type=int, default=4)
    parser.add_argument("--niter", type=int, default=3)
    parser.add_argument("--lr", type=float, default=0.0002)
    parser.add_argument("--beta1", type=float, default=0.5)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    netG = Generator().to(device)
    netG.apply(weights_init)
    netD = Discriminator().to(device)
    netD.apply(weights_init)
    try:
        with np.load(opt.init) as f:
            netG.load_state_dict({k[2:]: torch.from_numpy(f[k]) for k in f.files if k.startswith("G.")})
            netD.load_state_dict({k[2:]: torch.from_numpy(f[k]) for k in f.files if k.startswith("D.")})
    except FileNotFoundError:
        state = {f"G.{k}": v.detach().cpu().numpy() for k, v in netG.state_dict().items()}
        state.update({f"D.{k}": v.detach().cpu().numpy() for k, v in netD.state_dict().items()})
        np.savez(opt.init, **state)
    dtype = torch.float64 if opt.double else torch.float32
    netG.to(dtype)
    netD.to(dtype)
    print(netG)

    criterion = nn.BCELoss()
    rng = np.random.default_rng(0)
    fixed_noise = torch.from_numpy(rng.standard_normal((opt.batchSize, nz, 1, 1))).to(device, dtype)
    real_label, fake_label = 1, 0

    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
    errs = []
    for i in range(opt.niter):
        ############################
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        ###########################
        netD.zero_grad()
        real_cpu = torch.from_numpy(rng.uniform(-1, 1, (opt.batchSize, nc, 32, 32))).to(device, dtype)
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype, device=device)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.from_numpy(rng.standard_normal((batch_size, nz, 1, 1))).to(device, dtype)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        ############################
        # (2) Update G network: maximize log(D(G(z)))
        ###########################
        netG.zero_grad()
        label.fill_(real_label)  # fake labels are real for generator cost
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()
        errs.append([errD.item(), errG.item(), D_x, D_G_z1, D_G_z2])
        print('[%d/%d] Loss_D: %.4f Loss_G: %.4f D(x): %.4f D(G(z)): %.4f / %.4f'
              % (i, opt.niter, errD.item(), errG.item(), D_x, D_G_z1, D_G_z2))

    with torch.no_grad():
        fake = netG(fixed_noise).detach()
    result = {"errs": np.array(errs), "fake": fake.cpu().double().numpy()}
    result.update({f"G.{k}": v.detach().cpu().double().numpy() for k, v in netG.state_dict().items()})
    result.update({f"D.{k}": v.detach().cpu().double().numpy() for k, v in netD.state_dict().items()})
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
