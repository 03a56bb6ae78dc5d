"""Two of PyTorch's own examples (github.com/pytorch/examples, mnist/ and vae/) as they are written, on synthetic
28x28 digits: the MNIST classifier (two convolutions, max pooling, log_softmax + nll_loss, Adadelta with StepLR,
the test loop's summed loss and argmax(keepdim) accuracy) and the VAE (fully connected encoder and decoder, the
reparameterisation trick, binary_cross_entropy(reduction='sum') + the KL term, Adam). Changes from the examples,
the same on both sides: dropout off and the VAE's noise eps from NumPy (two libraries' generators never draw the
same numbers). --init/--out/--double are the conformance suite's knobs."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 16, 3, 1)
        self.dropout1 = nn.Dropout(0.0)
        self.dropout2 = nn.Dropout(0.0)
        self.fc1 = nn.Linear(2304, 32)
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(784, 64)
        self.fc21 = nn.Linear(64, 8)
        self.fc22 = nn.Linear(64, 8)
        self.fc3 = nn.Linear(8, 64)
        self.fc4 = nn.Linear(64, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps):
        std = torch.exp(0.5 * logvar)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def train(model, device, batches, optimizer, losses):
    model.train()
    for batch_idx, (data, target) in enumerate(batches):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())


def test(model, device, batches):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in batches:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()
    return test_loss / sum(len(t) for _, t in batches), correct


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    args = parser.parse_args()

    torch.manual_seed(1)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.float64 if args.double else torch.float32
    rng = np.random.default_rng(3)
    images = rng.uniform(0, 1, (4, 8, 1, 28, 28)) ** 3  # mostly dark, like digits
    labels = rng.integers(0, 10, (4, 8))
    batches = [(torch.from_numpy(images[i]).to(dtype), torch.from_numpy(labels[i])) for i in range(4)]
    eps = rng.standard_normal((args.epochs, 4, 8, 8))

    model, vae = Net().to(device), VAE().to(device)
    try:
        with np.load(args.init) as z:
            model.load_state_dict({k[4:]: torch.from_numpy(z[k]) for k in z.files if k.startswith("net.")})
            vae.load_state_dict({k[4:]: torch.from_numpy(z[k]) for k in z.files if k.startswith("vae.")})
    except FileNotFoundError:
        state = {f"net.{k}": v.cpu().numpy() for k, v in model.state_dict().items()}
        state.update({f"vae.{k}": v.cpu().numpy() for k, v in vae.state_dict().items()})
        np.savez(args.init, **state)
    model.to(dtype)
    vae.to(dtype)

    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses, evals = [], []
    for epoch in range(1, args.epochs + 1):
        train(model, device, batches[:3], optimizer, losses)
        evals.append(test(model, device, batches[3:]))
        scheduler.step()

    vae_opt = optim.Adam(vae.parameters(), lr=1e-3)
    vae_losses, first = [], {}
    for epoch in range(args.epochs):
        vae.train()
        train_loss = 0
        for batch_idx, (data, _) in enumerate(batches):
            data = data.to(device)
            vae_opt.zero_grad()
            recon_batch, mu, logvar = vae(data, torch.from_numpy(eps[epoch, batch_idx]).to(dtype).to(device))
            loss = loss_function(recon_batch, data, mu, logvar)
            loss.backward()
            if epoch == 0 and batch_idx == 0:
                first = {"step0/vae_loss": np.array(loss.item())}
                first.update({f"grad/vae.{k}": p.grad.detach().cpu().double().numpy()
                              for k, p in vae.named_parameters()})
            train_loss += loss.item()
            vae_opt.step()
        vae_losses.append(train_loss / 32)
    vae.eval()
    with torch.no_grad():
        sample = vae.decode(torch.from_numpy(eps[0, 0]).to(dtype).to(device)).cpu()

    result = {"losses": np.array(losses), "vae_losses": np.array(vae_losses),
              "eval/test_loss": np.array([e[0] for e in evals]), "eval/correct": np.array([e[1] for e in evals]),
              "lr": np.array(scheduler.get_last_lr()), "sample": sample.double().numpy(), **first}
    result.update({f"state/net.{k}": v.detach().cpu().double().numpy() for k, v in model.state_dict().items()})
    result.update({f"state/vae.{k}": v.detach().cpu().double().numpy() for k, v in vae.state_dict().items()})
    np.savez(args.out, **result)


if __name__ == "__main__":
    main()
