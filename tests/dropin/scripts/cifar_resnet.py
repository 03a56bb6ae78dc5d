"""CIFAR-10 classification in the style of the widely used pytorch-cifar training scripts: a CIFAR ResNet
(3x3 stem, BasicBlocks, 4 stages), DataLoader over a dataset, SGD with momentum and weight decay, MultiStepLR.
Synthetic data instead of CIFAR (no downloads); --init/--out/--double are the conformance suite's knobs."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(self.expansion * planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=10):
        super(ResNet, self).__init__()
        self.in_planes = 16
        self.conv1 = nn.Conv2d(3, 16, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.layer1 = self._make_layer(block, 16, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 32, num_blocks[1], stride=2)
        self.layer3 = self._make_layer(block, 64, num_blocks[2], stride=2)
        self.layer4 = self._make_layer(block, 128, num_blocks[3], stride=2)
        self.linear = nn.Linear(128 * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.layer3(out)
        out = self.layer4(out)
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        return self.linear(out)


def main():
    parser = argparse.ArgumentParser(description="CIFAR10 training (synthetic data)")
    parser.add_argument("--lr", default=0.1, type=float)
    parser.add_argument("--epochs", default=2, type=int)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.standard_normal((16, 3, 32, 32)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, 10, size=16))
    # shuffle=False: the two libraries' generators differ, and the comparison needs the same batches
    trainloader = DataLoader(TensorDataset(images, labels), batch_size=8, shuffle=False, num_workers=0)

    net = ResNet(BasicBlock, [1, 1, 1, 1]).to(device)
    try:
        with np.load(args.init) as f:
            net.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
    except FileNotFoundError:
        np.savez(args.init, **{k: v.detach().cpu().numpy() for k, v in net.state_dict().items()})
    if args.double:
        net = net.double()
    if device == "cuda":
        torch.backends.cudnn.benchmark = True

    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)
    scheduler = optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1], gamma=0.1)

    losses, first = [], {}
    for epoch in range(args.epochs):
        net.train()
        train_loss, correct, total = 0, 0, 0
        for batch_idx, (inputs, targets) in enumerate(trainloader):
            inputs, targets = inputs.to(device), targets.to(device)
            if args.double:
                inputs = inputs.double()
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            if not losses:  # for the test's float64 diagnosis: step 1's outputs and gradients, before any step
                first = {"step0/loss": np.array(loss.item()), "step0/out": outputs.detach().cpu().double().numpy()}
                first.update({f"grad/{k}": p.grad.detach().cpu().double().numpy()
                              for k, p in net.named_parameters()})
            optimizer.step()
            train_loss += loss.item()
            _, predicted = outputs.max(1)
            total += targets.size(0)
            correct += predicted.eq(targets).sum().item()
            losses.append(loss.item())
            print(f"epoch {epoch} batch {batch_idx} | Loss: {train_loss / (batch_idx + 1):.3f} | "
                  f"Acc: {100. * correct / total:.3f}% ({correct}/{total})")
        scheduler.step()

    net.eval()
    with torch.no_grad():
        test_out = net(images[:4].double() if args.double else images[:4])
    result = {"losses": np.array(losses), "eval": test_out.detach().cpu().double().numpy(), **first}
    result.update({f"state/{k}": v.detach().cpu().double().numpy() for k, v in net.state_dict().items()})
    np.savez(args.out, **result)


if __name__ == "__main__":
    main()
