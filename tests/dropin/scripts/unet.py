"""Semantic segmentation in the style of the widely used Pytorch-UNet repository's train.py: a UNet of
(conv => BN => ReLU) * 2 blocks, max-pool down, bilinear or transposed-convolution up with padding to the skip's
size, cross-entropy + dice loss, RMSprop, ReduceLROnPlateau on a validation dice score, GradScaler, gradient
clipping and a channels_last model. Synthetic images and masks instead of a dataset; --init/--out/--double are the
conformance suite's knobs."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim


class DoubleConv(nn.Module):
    """(convolution => [BN] => ReLU) * 2"""

    def __init__(self, in_channels, out_channels, mid_channels=None):
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True))

    def forward(self, x):
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x):
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels, out_channels, bilinear=True):
        super().__init__()
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        # the skip may be larger when a size was odd: pad x1 to it
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class OutConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super(OutConv, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1)

    def forward(self, x):
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels, n_classes, bilinear=False, base=8):
        super(UNet, self).__init__()
        self.n_channels, self.n_classes, self.bilinear = n_channels, n_classes, bilinear
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, base)
        self.down1 = Down(base, base * 2)
        self.down2 = Down(base * 2, base * 4)
        self.down3 = Down(base * 4, base * 8 // factor)
        self.up1 = Up(base * 8, base * 4 // factor, bilinear)
        self.up2 = Up(base * 4, base * 2 // factor, bilinear)
        self.up3 = Up(base * 2, base, bilinear)
        self.outc = OutConv(base, n_classes)

    def forward(self, x):
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x = self.up1(x4, x3)
        x = self.up2(x, x2)
        x = self.up3(x, x1)
        return self.outc(x)


def dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    sum_dim = (-1, -2) if input.dim() == 2 or not reduce_batch_first else (-1, -2, -3)
    inter = 2 * (input * target).sum(dim=sum_dim)
    sets_sum = input.sum(dim=sum_dim) + target.sum(dim=sum_dim)
    sets_sum = torch.where(sets_sum == 0, inter, sets_sum)
    dice = (inter + epsilon) / (sets_sum + epsilon)
    return dice.mean()


def multiclass_dice_coeff(input, target, reduce_batch_first=False, epsilon=1e-6):
    return dice_coeff(input.flatten(0, 1), target.flatten(0, 1), reduce_batch_first, epsilon)


def dice_loss(input, target, multiclass=False):
    fn = multiclass_dice_coeff if multiclass else dice_coeff
    return 1 - fn(input, target, reduce_batch_first=True)


@torch.inference_mode()
def evaluate(net, images, masks, n_classes):
    net.eval()
    mask_pred = net(images)
    mask_true = F.one_hot(masks, n_classes).permute(0, 3, 1, 2).float()
    mask_pred = F.one_hot(mask_pred.argmax(dim=1), n_classes).permute(0, 3, 1, 2).float()
    score = multiclass_dice_coeff(mask_pred[:, 1:], mask_true[:, 1:], reduce_batch_first=False)
    net.train()
    return score


def main():
    parser = argparse.ArgumentParser(description="Train the UNet on images and target masks (synthetic)")
    parser.add_argument("--epochs", "-e", type=int, default=2)
    parser.add_argument("--batch-size", "-b", dest="batch_size", type=int, default=2)
    parser.add_argument("--learning-rate", "-l", dest="lr", type=float, default=1e-5)
    parser.add_argument("--amp", action="store_true", default=False)
    parser.add_argument("--bilinear", action="store_true", default=False)
    parser.add_argument("--classes", "-c", type=int, default=3)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = UNet(n_channels=3, n_classes=args.classes, bilinear=args.bilinear)
    model = model.to(memory_format=torch.channels_last)
    try:
        with np.load(args.init) as f:
            model.load_state_dict({k: torch.from_numpy(f[k]) for k in f.files})
    except FileNotFoundError:
        np.savez(args.init, **{k: v.detach().cpu().numpy() for k, v in model.state_dict().items()})
    if args.double:
        model = model.double()
    model.to(device=device)

    rng = np.random.default_rng(0)
    dtype = torch.float64 if args.double else torch.float32
    images = torch.from_numpy(rng.standard_normal((4, 3, 32, 32))).to(dtype)
    masks = torch.from_numpy(rng.integers(0, args.classes, size=(4, 32, 32)))

    optimizer = optim.RMSprop(model.parameters(), lr=args.lr, weight_decay=1e-8, momentum=0.999)
    scheduler = optim.lr_scheduler.ReduceLROnPlateau(optimizer, "max", patience=5)  # goal: maximize Dice score
    grad_scaler = torch.cuda.amp.GradScaler(enabled=args.amp)
    criterion = nn.CrossEntropyLoss() if model.n_classes > 1 else nn.BCEWithLogitsLoss()
    global_step = 0
    losses, scores = [], []

    for epoch in range(1, args.epochs + 1):
        model.train()
        epoch_loss = 0
        for i in range(0, len(images), args.batch_size):
            batch_images = images[i:i + args.batch_size].to(device=device, memory_format=torch.channels_last)
            true_masks = masks[i:i + args.batch_size].to(device=device, dtype=torch.long)
            with torch.autocast(device.type if device.type != "mps" else "cpu", enabled=args.amp):
                masks_pred = model(batch_images)
                loss = criterion(masks_pred, true_masks)
                loss += dice_loss(F.softmax(masks_pred, dim=1).float(),
                                  F.one_hot(true_masks, model.n_classes).permute(0, 3, 1, 2).float(),
                                  multiclass=True)
            optimizer.zero_grad(set_to_none=True)
            grad_scaler.scale(loss).backward()
            grad_scaler.unscale_(optimizer)
            if global_step == 0:  # for the test's float64 diagnosis: step 1's loss and gradients, before any step
                first = {"step0/loss": np.array(loss.item())}
                first.update({f"grad/{k}": p.grad.detach().cpu().double().numpy()
                              for k, p in model.named_parameters() if p.grad is not None})
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            grad_scaler.step(optimizer)
            grad_scaler.update()
            global_step += 1
            epoch_loss += loss.item()
            losses.append(loss.item())
            print(f"epoch {epoch} step {global_step} train loss {loss.item():.4f}")
        val_score = evaluate(model, images[:2], masks[:2], model.n_classes)
        scheduler.step(val_score)
        scores.append(float(val_score))
        print(f"Validation Dice score: {val_score:.4f}")

    result = {"losses": np.array(losses), "dice": np.array(scores), **first}
    result.update({f"state/{k}": v.detach().cpu().double().numpy() for k, v in model.state_dict().items()})
    np.savez(args.out, **result)


if __name__ == "__main__":
    main()
