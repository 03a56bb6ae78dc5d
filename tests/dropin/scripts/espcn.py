"""Super-resolution in the style of the PyTorch examples repository's super_resolution/: the ESPCN network
(convolutions, then a sub-pixel convolution through PixelShuffle), orthogonal init with the ReLU gain, MSELoss,
Adam, PSNR from the MSE. Synthetic low/high-resolution pairs instead of BSDS300; --init/--out/--double are the
conformance suite's knobs."""
import argparse
from math import log10

import numpy as np
import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        self._initialize_weights()

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))

    def _initialize_weights(self):
        init.orthogonal_(self.conv1.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv2.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv3.weight, init.calculate_gain("relu"))
        init.orthogonal_(self.conv4.weight)


def main():
    parser = argparse.ArgumentParser(description="PyTorch Super Res Example (synthetic data)")
    parser.add_argument("--upscale_factor", type=int, default=3)
    parser.add_argument("--batchSize", type=int, default=4)
    parser.add_argument("--nEpochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()

    torch.manual_seed(123)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(0)
    dtype = np.float64 if opt.double else np.float32
    target = rng.uniform(0, 1, (8, 1, 24, 24)).astype(dtype)
    # the low-resolution input: the target averaged over upscale_factor x upscale_factor blocks
    f = opt.upscale_factor
    lowres = target.reshape(8, 1, 24 // f, f, 24 // f, f).mean(axis=(3, 5))
    train_set = TensorDataset(torch.from_numpy(lowres), torch.from_numpy(target))
    training_data_loader = DataLoader(dataset=train_set, num_workers=0, batch_size=opt.batchSize, shuffle=False)

    model = Net(upscale_factor=opt.upscale_factor).to(device)
    try:
        with np.load(opt.init) as z:
            model.load_state_dict({k: torch.from_numpy(z[k]) for k in z.files})
    except FileNotFoundError:
        np.savez(opt.init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    if opt.double:
        model.double()
    criterion = nn.MSELoss()
    optimizer = optim.Adam(model.parameters(), lr=opt.lr)

    losses, psnrs, first = [], [], {}
    for epoch in range(1, opt.nEpochs + 1):
        epoch_loss = 0
        for iteration, batch in enumerate(training_data_loader, 1):
            input, target_ = batch[0].to(device), batch[1].to(device)
            optimizer.zero_grad()
            loss = criterion(model(input), target_)
            epoch_loss += loss.item()
            loss.backward()
            if not losses:  # for the test's float64 diagnosis: step 1's loss and gradients, before any step
                first = {"step0/loss": np.array(loss.item())}
                first.update({f"grad/{k}": p.grad.detach().cpu().double().numpy()
                              for k, p in model.named_parameters()})
            optimizer.step()
            losses.append(loss.item())
            print("===> Epoch[{}]({}/{}): Loss: {:.4f}".format(epoch, iteration, len(training_data_loader),
                                                              loss.item()))
        avg_psnr = 0
        with torch.no_grad():
            for batch in training_data_loader:
                input, target_ = batch[0].to(device), batch[1].to(device)
                prediction = model(input)
                mse = criterion(prediction, target_)
                psnr = 10 * log10(1 / mse.item())
                avg_psnr += psnr
        psnrs.append(avg_psnr / len(training_data_loader))
        print("===> Avg. PSNR: {:.4f} dB".format(avg_psnr / len(training_data_loader)))

    result = {"losses": np.array(losses), "psnr": np.array(psnrs), **first}
    result.update({f"state/{k}": v.detach().cpu().double().numpy() for k, v in model.state_dict().items()})
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
