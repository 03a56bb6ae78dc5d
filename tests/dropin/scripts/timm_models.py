"""timm (PyTorch Image Models), the model zoo most CNN training code builds from: a few of its families created with
timm.create_model, trained one step the way timm's train.py does (AdamW from timm.optim, label-smoothing cross
entropy from timm.loss, an exponential moving average of the weights, timm.utils.ModelEmaV3), then evaluated with
the EMA weights. GhostNet writes in place into a slice of a concatenation, ConvNeXt has LayerNorm2d and layer
scale, EfficientNet squeeze-excitation and SiLU, MobileViT attention over unfolded patches. Dropout and drop path
are off, so both libraries compute the same function. --init/--out/--double are the conformance suite's knobs."""
import argparse

import numpy as np
import timm
import torch
from timm.loss import LabelSmoothingCrossEntropy
from timm.optim import create_optimizer_v2
from timm.utils import ModelEmaV3

MODELS = ("ghostnet_100", "convnext_atto", "efficientnet_b0", "mobilevit_xxs")


def main():
    parser = argparse.ArgumentParser(description="timm models, one training step each (synthetic data)")
    parser.add_argument("--init", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--double", action="store_true")
    opt = parser.parse_args()
    dtype = np.float64 if opt.double else np.float32
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((2, 3, 64, 64)).astype(dtype))
    y = torch.tensor([3, 7])

    torch.manual_seed(0)
    models = {n: timm.create_model(n, pretrained=False, num_classes=10, drop_rate=0.0,
                                   **({} if n.startswith("ghostnet") else {"drop_path_rate": 0.0}))
              for n in MODELS}
    try:
        with np.load(opt.init) as z:
            for n, m in models.items():
                m.load_state_dict({k[len(n) + 1:]: torch.from_numpy(z[k]) for k in z.files if k.startswith(n + "/")})
    except FileNotFoundError:
        np.savez(opt.init, **{f"{n}/{k}": v.detach().cpu().numpy() for n, m in models.items()
                              for k, v in m.state_dict().items()})

    result = {}
    criterion = LabelSmoothingCrossEntropy(smoothing=0.1)
    for n, model in models.items():
        if opt.double:
            model.double()
        optimizer = create_optimizer_v2(model, opt="adamw", lr=1e-3, weight_decay=0.05)
        ema = ModelEmaV3(model, decay=0.9)
        model.train()
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        result[f"step0/{n}/loss"] = np.array(loss.item())  # step0/ and grad/: the float64 diagnosis reads them
        result.update({f"grad/{n}/{k}": p.grad.detach().double().numpy()
                       for k, p in model.named_parameters() if p.grad is not None})
        optimizer.step()
        ema.update(model)
        ema.module.eval()
        with torch.no_grad():
            result[f"ema_logits/{n}"] = ema.module(x).double().numpy()
        print(f"{n}: loss {loss.item():.6f}")
    np.savez(opt.out, **result)


if __name__ == "__main__":
    main()
