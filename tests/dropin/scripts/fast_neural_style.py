"""Style transfer in the style of the PyTorch examples repository's fast_neural_style/: the TransformerNet
(reflection-padded convolutions, InstanceNorm2d(affine=True), residual blocks, upsampling by nearest
interpolation), a perceptual loss on torchvision's VGG16 features (relu1_2 ... relu4_3), Gram matrices by bmm,
ImageNet normalisation, Adam. Synthetic content and style images; the VGG is built with weights=None and its state
comes from --init with the rest (no downloads); --init/--out/--double are the conformance suite's knobs."""
import argparse
from collections import namedtuple

import numpy as np
import torch
from torch.optim import Adam
from torchvision import models


class ConvLayer(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super(ConvLayer, self).__init__()
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        return self.conv2d(self.reflection_pad(x))


class ResidualBlock(torch.nn.Module):
    def __init__(self, channels):
        super(ResidualBlock, self).__init__()
        self.conv1 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.conv2 = ConvLayer(channels, channels, kernel_size=3, stride=1)
        self.in2 = torch.nn.InstanceNorm2d(channels, affine=True)
        self.relu = torch.nn.ReLU()

    def forward(self, x):
        residual = x
        out = self.relu(self.in1(self.conv1(x)))
        out = self.in2(self.conv2(out))
        return out + residual


class UpsampleConvLayer(torch.nn.Module):
    """Upsample, then convolve: fewer checkerboard artifacts than a transposed convolution."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, upsample=None):
        super(UpsampleConvLayer, self).__init__()
        self.upsample = upsample
        reflection_padding = kernel_size // 2
        self.reflection_pad = torch.nn.ReflectionPad2d(reflection_padding)
        self.conv2d = torch.nn.Conv2d(in_channels, out_channels, kernel_size, stride)

    def forward(self, x):
        x_in = x
        if self.upsample:
            x_in = torch.nn.functional.interpolate(x_in, mode="nearest", scale_factor=self.upsample)
        return self.conv2d(self.reflection_pad(x_in))


class TransformerNet(torch.nn.Module):
    def __init__(self, width=8):
        super(TransformerNet, self).__init__()
        w = width
        self.conv1 = ConvLayer(3, w, kernel_size=9, stride=1)
        self.in1 = torch.nn.InstanceNorm2d(w, affine=True)
        self.conv2 = ConvLayer(w, 2 * w, kernel_size=3, stride=2)
        self.in2 = torch.nn.InstanceNorm2d(2 * w, affine=True)
        self.conv3 = ConvLayer(2 * w, 4 * w, kernel_size=3, stride=2)
        self.in3 = torch.nn.InstanceNorm2d(4 * w, affine=True)
        self.res1 = ResidualBlock(4 * w)
        self.res2 = ResidualBlock(4 * w)
        self.deconv1 = UpsampleConvLayer(4 * w, 2 * w, kernel_size=3, stride=1, upsample=2)
        self.in4 = torch.nn.InstanceNorm2d(2 * w, affine=True)
        self.deconv2 = UpsampleConvLayer(2 * w, w, kernel_size=3, stride=1, upsample=2)
        self.in5 = torch.nn.InstanceNorm2d(w, affine=True)
        self.deconv3 = ConvLayer(w, 3, kernel_size=9, stride=1)
        self.relu = torch.nn.ReLU()

    def forward(self, X):
        y = self.relu(self.in1(self.conv1(X)))
        y = self.relu(self.in2(self.conv2(y)))
        y = self.relu(self.in3(self.conv3(y)))
        y = self.res1(y)
        y = self.res2(y)
        y = self.relu(self.in4(self.deconv1(y)))
        y = self.relu(self.in5(self.deconv2(y)))
        return self.deconv3(y)


class Vgg16(torch.nn.Module):
    def __init__(self, requires_grad=False):
        super(Vgg16, self).__init__()
        vgg_pretrained_features = models.vgg16(weights=None).features
        self.slice1 = torch.nn.Sequential()
        self.slice2 = torch.nn.Sequential()
        self.slice3 = torch.nn.Sequential()
        self.slice4 = torch.nn.Sequential()
        for x in range(4):
            self.slice1.add_module(str(x), vgg_pretrained_features[x])
        for x in range(4, 9):
            self.slice2.add_module(str(x), vgg_pretrained_features[x])
        for x in range(9, 16):
            self.slice3.add_module(str(x), vgg_pretrained_features[x])
        for x in range(16, 23):
            self.slice4.add_module(str(x), vgg_pretrained_features[x])
        if not requires_grad:
            for param in self.parameters():
                param.requires_grad = False

    def forward(self, X):
        h = self.slice1(X)
        h_relu1_2 = h
        h = self.slice2(h)
        h_relu2_2 = h
        h = self.slice3(h)
        h_relu3_3 = h
        h = self.slice4(h)
        h_relu4_3 = h
        vgg_outputs = namedtuple("VggOutputs", ["relu1_2", "relu2_2", "relu3_3", "relu4_3"])
        return vgg_outputs(h_relu1_2, h_relu2_2, h_relu3_3, h_relu4_3)


def gram_matrix(y):
    (b, ch, h, w) = y.size()
    features = y.view(b, ch, w * h)
    features_t = features.transpose(1, 2)
    return features.bmm(features_t) / (ch * h * w)


def normalize_batch(batch):
    # normalize using imagenet mean and std
    mean = batch.new_tensor([0.485, 0.456, 0.406]).view(-1, 1, 1)
    std = batch.new_tensor([0.229, 0.224, 0.225]).view(-1, 1, 1)
    batch = batch.div_(255.0)
    return (batch - mean) / std


def main():
    parser = argparse.ArgumentParser(description="parser for fast-neural-style (synthetic images)")
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--content-weight", type=float, default=1e5)
    parser.add_argument("--style-weight", type=float, default=1e10)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    args = parser.parse_args()

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(42)
    transformer = TransformerNet().to(device)
    vgg = Vgg16(requires_grad=False).to(device)
    try:
        with np.load(args.init) as f:
            transformer.load_state_dict({k[2:]: torch.from_numpy(f[k]) for k in f.files if k.startswith("T.")})
            vgg.load_state_dict({k[2:]: torch.from_numpy(f[k]) for k in f.files if k.startswith("V.")})
    except FileNotFoundError:
        state = {f"T.{k}": v.detach().cpu().numpy() for k, v in transformer.state_dict().items()}
        state.update({f"V.{k}": v.detach().cpu().numpy() for k, v in vgg.state_dict().items()})
        np.savez(args.init, **state)
    dtype = torch.float64 if args.double else torch.float32
    transformer.to(dtype)
    vgg.to(dtype)
    optimizer = Adam(transformer.parameters(), args.lr)
    mse_loss = torch.nn.MSELoss()

    rng = np.random.default_rng(0)
    n, s = args.batch_size, args.image_size
    style = torch.from_numpy(rng.uniform(0, 255, (1, 3, s, s))).to(device, dtype)
    style = style.repeat(n, 1, 1, 1)
    features_style = vgg(normalize_batch(style))
    gram_style = [gram_matrix(y) for y in features_style]

    transformer.train()
    history, first = [], {}
    for batch_id in range(args.steps):
        x = torch.from_numpy(rng.uniform(0, 255, (n, 3, s, s))).to(device, dtype)
        n_batch = len(x)
        optimizer.zero_grad()
        y = transformer(x)
        y = normalize_batch(y)
        x = normalize_batch(x)
        features_y = vgg(y)
        features_x = vgg(x)
        content_loss = args.content_weight * mse_loss(features_y.relu2_2, features_x.relu2_2)
        style_loss = 0.
        for ft_y, gm_s in zip(features_y, gram_style):
            gm_y = gram_matrix(ft_y)
            style_loss += mse_loss(gm_y, gm_s[:n_batch, :, :])
        style_loss *= args.style_weight
        total_loss = content_loss + style_loss
        total_loss.backward()
        if not history:  # for the test's float64 diagnosis: step 1's loss and gradients, before any step
            first = {"step0/loss": np.array(total_loss.item())}
            first.update({f"grad/{k}": p.grad.detach().cpu().double().numpy()
                          for k, p in transformer.named_parameters() if p.grad is not None})
        optimizer.step()
        history.append([content_loss.item(), style_loss.item(), total_loss.item()])
        print("step {}\tcontent: {:.6f}\tstyle: {:.6f}\ttotal: {:.6f}".format(
            batch_id + 1, content_loss.item(), style_loss.item(), total_loss.item()))

    transformer.eval()
    with torch.no_grad():
        stylized = transformer(torch.from_numpy(rng.uniform(0, 255, (1, 3, s, s))).to(device, dtype))
    result = {"losses": np.array(history), "stylized": stylized.cpu().double().numpy(), **first}
    result.update({f"T.{k}": v.detach().cpu().double().numpy() for k, v in transformer.state_dict().items()})
    np.savez(args.out, **result)


if __name__ == "__main__":
    main()
