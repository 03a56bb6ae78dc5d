"""gm.utils.tensorboard.SummaryWriter against torch.utils.tensorboard's: the same calls, read back by
TensorBoard's own event reader, give the same scalars, histogram statistics, images and text."""
import numpy as np
import pytest

import gpumemnet as gm

torch = pytest.importorskip("torch")
pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from torch.utils.tensorboard import SummaryWriter as TorchWriter  # noqa: E402


def _log(writer_cls, lib, log_dir):
    r = np.random.RandomState(0)
    with writer_cls(log_dir=str(log_dir)) as w:
        for step in range(3):
            w.add_scalar("loss/train", lib.tensor(1.0 / (step + 1)), step)
            w.add_scalar("lr", 0.1 * 0.5 ** step, global_step=step)
            w.add_scalars("acc", {"train": 0.5 + step / 10, "val": lib.tensor(0.4 + step / 20)}, step)
        w.add_histogram("weights", lib.tensor(r.randn(1000).astype(np.float32)), 2)
        w.add_image("sample", lib.tensor(r.rand(3, 8, 6).astype(np.float32)), 1)
        w.add_image("gray", lib.tensor(r.rand(5, 4).astype(np.float32)), 1, dataformats="HW")
        w.add_images("batch", lib.tensor(r.rand(10, 1, 4, 4).astype(np.float32)), 1)
        w.add_text("note", "**bold** text", 0)


def _read(path):
    acc = EventAccumulator(str(path), size_guidance={"images": 0, "histograms": 0, "tensors": 0, "scalars": 0})
    acc.Reload()
    return acc


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    d = tmp_path_factory.mktemp("tb")
    _log(gm.utils.tensorboard.SummaryWriter, gm, d / "gm")
    _log(TorchWriter, torch, d / "torch")
    return d / "gm", d / "torch"


def test_scalars_match(both):
    ours, theirs = _read(both[0]), _read(both[1])
    for tag in ("loss/train", "lr"):
        a = [(e.step, e.value) for e in ours.Scalars(tag)]
        b = [(e.step, e.value) for e in theirs.Scalars(tag)]
        assert a == b


def test_scalar_groups_go_to_one_folder_per_series(both):
    for series in ("acc_train", "acc_val"):
        a = [(e.step, e.value) for e in _read(both[0] / series).Scalars("acc")]
        b = [(e.step, e.value) for e in _read(both[1] / series).Scalars("acc")]
        assert a == b and len(a) == 3


def test_histogram_statistics_match(both):
    a = _read(both[0]).Histograms("weights")[0].histogram_value
    b = _read(both[1]).Histograms("weights")[0].histogram_value
    for field in ("min", "max", "num", "sum", "sum_squares"):
        assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-6), field
    assert list(a.bucket_limit) == pytest.approx(list(b.bucket_limit), rel=1e-12)  # TensorBoard's default edges
    assert list(a.bucket) == list(b.bucket)


@pytest.mark.parametrize("bins, max_bins, scale", [("tensorflow", None, 1.0), ("tensorflow", 50, 1e-3), (7, None, 1.0),
                                                   ("auto", 5, 1.0), ("tensorflow", None, 0.0)])
def test_histogram_buckets_are_pytorchs(tmp_path, bins, max_bins, scale):
    """add_histogram's buckets as PyTorch writes them: TensorBoard's default edges for bins='tensorflow' (they were
    NumPy's 'auto' rule: 5 buckets where PyTorch has about 580), merged in groups past max_bins, cut to the
    buckets that hold values with one to their left."""
    values = np.random.RandomState(3).randn(1000) * scale + (3.0 if scale == 0 else 0.0)
    got, want = [], []
    for lib, writer_cls, out in ((gm, gm.utils.tensorboard.SummaryWriter, got), (torch, TorchWriter, want)):
        with writer_cls(log_dir=str(tmp_path / lib.__name__)) as w:
            w.add_histogram("h", lib.tensor(values), 0, bins=bins, max_bins=max_bins)
        h = _read(tmp_path / lib.__name__).Histograms("h")[0].histogram_value
        out.extend([h.min, h.max, h.num, h.sum, h.sum_squares, list(h.bucket_limit), list(h.bucket)])
    assert got == want


def test_images_decode_to_the_same_pixels(both):
    from PIL import Image
    import io
    for tag in ("sample", "gray", "batch"):
        a = _read(both[0]).Images(tag)[0]
        b = _read(both[1]).Images(tag)[0]
        assert (a.width, a.height) == (b.width, b.height), tag
        pa = np.asarray(Image.open(io.BytesIO(a.encoded_image_string)).convert("RGB"))
        pb = np.asarray(Image.open(io.BytesIO(b.encoded_image_string)).convert("RGB"))
        np.testing.assert_array_equal(pa, pb, err_msg=tag)


def test_text_matches(both):
    a = _read(both[0]).Tensors("note/text_summary")[0].tensor_proto.string_val
    b = _read(both[1]).Tensors("note/text_summary")[0].tensor_proto.string_val
    assert list(a) == list(b) == [b"**bold** text"]


def test_add_graph_warns_and_writes_nothing(tmp_path):
    w = gm.utils.tensorboard.SummaryWriter(log_dir=str(tmp_path))
    with pytest.warns(UserWarning, match="cannot trace"):
        w.add_graph(gm.nn.Linear(2, 2), gm.zeros(1, 2))
    with pytest.raises(NotImplementedError, match="add_audio"):
        w.add_audio("a", gm.zeros(10), 0)
    with pytest.raises(ValueError, match="one value"):
        w.add_scalar("x", gm.zeros(2), 0)
    w.close()


HPARAMS = ({"lr": 0.1, "layers": "16-8", "flag": True, "n": 3, "skip": None}, {"hp_metric": -1, "acc": 0.5})


def test_summary_hparams_protos_are_pytorchs():
    """torch.utils.tensorboard.summary.hparams / scalar, which Lightning's TensorBoardLogger writes through
    SummaryWriter._get_file_writer(): the same protos, byte for byte."""
    from torch.utils.tensorboard import summary as torch_summary
    from gpumemnet.utils.tensorboard import summary
    for ref, got in zip(torch_summary.hparams(*HPARAMS, {"n": [1, 3, 5]}), summary.hparams(*HPARAMS, {"n": [1, 3, 5]})):
        assert got.SerializeToString() == ref.SerializeToString()
    assert summary.scalar("loss", gm.tensor(0.25)).SerializeToString() == \
        torch_summary.scalar("loss", torch.tensor(0.25)).SerializeToString()
    with pytest.raises(ValueError, match="one of int, float, str, bool"):
        summary.hparams({"x": [1]}, {})


def test_add_hparams_and_the_file_writer_as_lightning_uses_them(tmp_path):
    for name, cls in (("gm", gm.utils.tensorboard.SummaryWriter), ("torch", TorchWriter)):
        with cls(log_dir=str(tmp_path / name)) as w:
            w.add_hparams(*HPARAMS, run_name="run")
            w._get_file_writer().add_summary(gm.utils.tensorboard.summary.scalar("direct", 2.0), 7)
    for sub in ("run", "."):
        got, ref = _read(tmp_path / "gm" / sub), _read(tmp_path / "torch" / sub)
        assert got.Tags()["scalars"] == ref.Tags()["scalars"] and got.Tags()["scalars"]
        for tag in ref.Tags()["scalars"]:
            assert [(e.step, e.value) for e in got.Scalars(tag)] == [(e.step, e.value) for e in ref.Scalars(tag)]
    plugin = _read(tmp_path / "gm" / "run").PluginTagToContent("hparams")
    assert plugin == _read(tmp_path / "torch" / "run").PluginTagToContent("hparams") and len(plugin) == 3
