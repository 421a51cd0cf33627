"""rerank/embed/cnn.py: torchvision-style preprocessing, feature extraction in split order,
errors for missing images, and the real EfficientNet-Lite0 network on generated images."""

import json
import os

import numpy as np
import pytest

from tests.conftest import needs

pytestmark = needs("cnn")

import torch  # noqa: E402
from PIL import Image  # noqa: E402

from rerank.embed.cnn import IMAGENET_MEAN, IMAGENET_STD, Backbone, extract_features, extract_split, preprocess_image  # noqa: E402
from rerank.errors import InputError  # noqa: E402


class ChannelMean(torch.nn.Module):
    """(B, 3, H, W) -> (B, 3): per-channel means (a backbone whose output we can predict)."""

    def forward(self, x):
        return x.mean(dim=(2, 3))


def test_preprocess_solid_colour_is_normalised_per_channel():
    out = preprocess_image(Image.new("RGB", (300, 200), (255, 0, 128)))
    assert out.shape == (3, 224, 224) and out.dtype == np.float32
    expected = [
        (1.0 - IMAGENET_MEAN[0]) / IMAGENET_STD[0],
        (0.0 - IMAGENET_MEAN[1]) / IMAGENET_STD[1],
        (128 / 255 - IMAGENET_MEAN[2]) / IMAGENET_STD[2],
    ]
    np.testing.assert_allclose(out.mean(axis=(1, 2)), expected, rtol=1e-5)


def test_preprocess_resizes_shorter_side_and_centre_crops():
    # 448 x 224, left half black, right half white -> resized to 512 x 256, crop columns 144..367:
    # the boundary (column 256) falls in the middle of the crop
    pixels = np.zeros((224, 448, 3), dtype=np.uint8)
    pixels[:, 224:] = 255
    out = preprocess_image(Image.fromarray(pixels), mean=(0, 0, 0), std=(1, 1, 1))
    assert np.allclose(out[:, :, :100], 0.0) and np.allclose(out[:, :, 124:], 1.0)
    # a grey-scale image becomes three equal channels
    grey = preprocess_image(Image.new("L", (224, 224), 51), mean=(0, 0, 0), std=(1, 1, 1))
    np.testing.assert_allclose(grey, 0.2, atol=1e-6)


def _write_images(directory, colours):
    names = []
    for i, colour in enumerate(colours):
        name = f"img{i}.png"
        Image.new("RGB", (240, 260), colour).save(os.path.join(directory, name))
        names.append(name)
    return names


def test_extract_split_rows_follow_the_split_file(tmp_path):
    names = _write_images(tmp_path, [(255, 0, 0), (0, 255, 0), (0, 0, 255)])
    split = tmp_path / "split.txt"
    split.write_text("\n".join([names[2], names[0], names[1]]) + "\n")
    got_names, matrix = extract_split(
        str(tmp_path), str(split), Backbone(ChannelMean(), 3, (0, 0, 0), (1, 1, 1)), batch_size=2
    )
    assert got_names == [names[2], names[0], names[1]]
    np.testing.assert_allclose(matrix, [[0, 0, 1], [1, 0, 0], [0, 1, 0]], atol=1e-6)


def test_missing_image_names_split_file_and_line(tmp_path):
    names = _write_images(tmp_path, [(1, 2, 3)])
    split = tmp_path / "split.txt"
    split.write_text(f"{names[0]}\nnot-there.jpg\n")
    with pytest.raises(InputError, match=r"split.txt:2: cannot read image .*not-there.jpg"):
        extract_split(str(tmp_path), str(split), Backbone(ChannelMean(), 3))
    (tmp_path / "broken.jpg").write_text("not an image")
    split.write_text("broken.jpg\n")
    with pytest.raises(InputError, match=r"split.txt:1: cannot read image"):
        extract_split(str(tmp_path), str(split), Backbone(ChannelMean(), 3))


def test_wrong_backbone_output_shape_is_an_error(tmp_path):
    names = _write_images(tmp_path, [(1, 2, 3)])
    with pytest.raises(ValueError, match="expected"):
        extract_features([str(tmp_path / names[0])], Backbone(ChannelMean(), 5))


def test_real_efficientnet_lite0_on_generated_images(tmp_path):
    from rerank.embed.cnn import load_backbone

    rng = np.random.default_rng(0)
    paths = []
    for i in range(3):
        path = tmp_path / f"noise{i}.png"
        Image.fromarray(rng.integers(0, 256, (230, 250, 3), dtype=np.uint8)).save(path)
        paths.append(str(path))
    paths.append(paths[0])
    backbone = load_backbone("efficientnet-lite0")
    one = extract_features(paths, backbone, batch_size=1)
    many = extract_features(paths, backbone, batch_size=4)
    assert one.shape == (4, 1280) and np.isfinite(one).all()
    np.testing.assert_allclose(one, many, atol=1e-4)  # batch size does not change features (eval mode)
    np.testing.assert_allclose(one[0], one[3], atol=1e-6)  # the same image twice
    assert np.abs(one[0] - one[1]).max() > 1e-2  # different images differ


def test_cli_extract_writes_matrix_and_signature(tmp_path):
    from rerank.cli import main
    from rerank.embed.data import load_image_features

    names = _write_images(tmp_path, [(200, 10, 10), (10, 200, 10)])
    split = tmp_path / "split.txt"
    split.write_text("\n".join(names) + "\n")
    out = tmp_path / "feats.npy"
    assert (
        main(
            [
                "features",
                "extract",
                "--images-dir",
                str(tmp_path),
                "--image-split",
                str(split),
                "--cnn",
                "efficientnet-lite0",
                "--dtype",
                "float16",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    got_names, matrix = load_image_features(str(out), str(split))
    assert got_names == names and matrix.shape == (2, 1280)
    assert np.load(out).dtype == np.float16
    meta = json.loads((tmp_path / "feats.json").read_text())
    assert meta["cnn"] == "efficientnet-lite0" and meta["rows"] == 2 and "torch" in meta["signature"]
    assert (
        main(
            [
                "features",
                "extract",
                "--images-dir",
                str(tmp_path),
                "--image-split",
                str(split),
                "--cnn",
                "alexnet",
                "--out",
                str(tmp_path / "x.npy"),
            ]
        )
        == 1
    )
    assert not (tmp_path / "x.npy").exists()
