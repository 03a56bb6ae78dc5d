"""python -m gpumemnet.demo: the digits CNN reaches >= 95% test accuracy, and the memory it reports is split by
category the way a training step spends it. Needs scikit-learn (the [demo] extra)."""
import gpumemnet as gm
from gpumemnet import demo


def test_demo_trains_a_cnn_to_95_percent():
    acc, stats = demo.train(epochs=4, seed=0)
    assert acc >= 0.95, f"test accuracy {acc:.3f}"
    peaks = {k: v["peak"] for k, v in stats["by_category"].items()}
    for cat in ("parameter", "gradient", "optimizer", "activation", "input"):
        assert peaks[cat] > 0, f"no {cat} memory recorded: {peaks}"
    n_params = sum(p.numel() for p in demo.make_model().parameters())
    assert n_params == 16 * 9 + 2 * 16 + 32 * 16 * 9 + 2 * 32 + 32 * 10 + 10  # convs have no bias (BN follows)
    # Adam keeps two moments per parameter (bytes are rounded up to 512 per tensor by the allocator)
    assert 2 * 4 * n_params <= peaks["optimizer"] <= 2 * 4 * n_params + 2 * 512 * 10


def test_demo_main_prints_accuracy_and_memory(capsys):
    demo.main(["--epochs", "1"])
    out = capsys.readouterr().out
    assert "GlobalAvgPool2d()" in out and "test accuracy" in out
    assert "peak by category:" in out and "optimizer" in out and "activation" in out


def test_demo_model_estimates_on_meta():
    model = demo.make_model(device="meta")
    out = model(gm.empty(64, 1, 8, 8, device="meta"))
    assert tuple(out.shape) == (64, 10) and out._device == "meta"
    del model, out
    gm.memory.empty_cache("meta")
