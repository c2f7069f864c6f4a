"""Images in a vision-language model's prompt: how many tokens they become, and what
encoding them costs. Pure: the emulated server, the in-process emulator and the
simulator all count images by this one rule.

The rule (Qwen2-VL, Qwen2.5-VL and Qwen3-VL processors; ``data/vision.csv`` gives each
model's figures and their sources):

1. **Resize** (``smart_resize`` of transformers' ``Qwen2VLImageProcessor``, which
   Qwen3-VL's processor uses): with ``factor = patch_size x merge_size`` (16 x 2 = 32
   for Qwen3-VL; 14 x 2 = 28 for Qwen2/2.5-VL), round each side to the nearest multiple
   of the factor (Python's ``round``: halves go to the even multiple); if the area is
   then above ``max_pixels``, scale both sides by ``beta = sqrt(h x w / max_pixels)``
   and round *down* to multiples of the factor (at least one factor); if it is below
   ``min_pixels``, scale by ``beta = sqrt(min_pixels / (h x w))`` and round *up*. An
   aspect ratio above 200 is refused, as the processor refuses it.
2. **Patches**: the resized image is cut into ``patch_size`` squares:
   ``grid_h x grid_w = (h' / patch) x (w' / patch)`` patches (one temporal patch for a
   still image: the processor repeats the frame ``temporal_patch_size`` times).
3. **Tokens**: the merger joins ``merge_size x merge_size`` neighbouring patches into
   one token, so an image is ``grid_h x grid_w / merge_size^2`` ``<|image_pad|>``
   tokens, plus ``markers`` tokens around them in the prompt (``<|vision_start|>`` and
   ``<|vision_end|>``). A 512 x 512 image on Qwen3-VL: 512 x 512 stays (both multiples
   of 32, area within the limits), 32 x 32 = 1024 patches, 256 image tokens, 258 prompt
   tokens.

The encoder (a ViT) costs, per image of ``P`` patches, in FLOPs: the patch embedding
``2 P (3 x temporal x patch^2) hidden``; per block the linear layers
``2 P (4 hidden^2 + 2 hidden x intermediate)`` and full attention over the image's
patches ``4 P^2 hidden``; per patch merger ``2 (P / merge^2) ((hidden merge^2)^2 +
hidden merge^2 x out_hidden)``. Its weights (about 0.6 B parameters for Qwen3-VL) are not
counted in the deployment's memory (0.25% of the language model's).

Images arrive as data URLs (``data:image/png;base64,...``): :func:`data_url_image` reads
the format and size from the header bytes only (decoding a growing prefix of the base64
text), with :func:`tokenmark.workload.images.sniff`; no image decoder is needed.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from tokenmark.errors import ConfigError
from tokenmark.perfmodel.hardware import ModelArch, Precision, read_data_csv
from tokenmark.records import Message
from tokenmark.workload.images import ImageInfo, sniff

__all__ = [
    "MAX_ASPECT_RATIO",
    "PromptImage",
    "VisionEncoder",
    "chat_images",
    "data_url_image",
    "prompt_image",
    "smart_resize",
    "vision_encoder",
]

#: The processor refuses images whose long side exceeds this many times the short side.
MAX_ASPECT_RATIO = 200
_PREFIX_CHARS = 64  # base64 characters decoded first (48 bytes: enough for all but JPEG)


def smart_resize(height: int, width: int, factor: int, min_pixels: int,
                 max_pixels: int) -> tuple[int, int]:
    """The size ``(height, width)`` an image is resized to (see the module docstring).
    ValueError for a side below 1 or an aspect ratio above :data:`MAX_ASPECT_RATIO`."""
    if height < 1 or width < 1:
        raise ValueError(f"an image of {width} x {height} pixels has no area")
    if max(height, width) / min(height, width) > MAX_ASPECT_RATIO:
        raise ValueError(f"absolute aspect ratio must be smaller than {MAX_ASPECT_RATIO}, "
                         f"got {max(height, width) / min(height, width)}")
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


@dataclass(frozen=True, slots=True)
class VisionEncoder:
    """A vision-language model's image processor and vision encoder (``vision.csv``)."""

    model: str
    patch_size: int
    merge_size: int
    temporal_patch_size: int
    min_pixels: int
    max_pixels: int
    depth: int
    hidden: int
    intermediate: int
    heads: int
    mergers: int
    out_hidden: int
    markers: int
    #: The precision its weights keep and its matmuls run at whatever the language
    #: model's (None: the language model's): quantisation recipes leave the vision
    #: tower unquantised (vision.csv's sources).
    precision: Precision | None = None

    @property
    def factor(self) -> int:
        return self.patch_size * self.merge_size

    def resized(self, width: int, height: int) -> tuple[int, int]:
        """``(width, height)`` after the processor's resize."""
        h, w = smart_resize(height, width, self.factor, self.min_pixels, self.max_pixels)
        return w, h

    def patches(self, width: int, height: int) -> int:
        """Patches the encoder sees for one still image."""
        w, h = self.resized(width, height)
        return (w // self.patch_size) * (h // self.patch_size)

    def image_tokens(self, width: int, height: int) -> int:
        """``<|image_pad|>`` tokens of one image (patches / merge^2)."""
        return self.patches(width, height) // (self.merge_size * self.merge_size)

    def prompt_tokens(self, width: int, height: int) -> int:
        """Prompt tokens one image adds: its image tokens and the markers around them."""
        return self.image_tokens(width, height) + self.markers

    @property
    def params(self) -> float:
        """Encoder parameters (weights of the blocks, the patch embedding, the mergers)."""
        h, m2 = self.hidden, self.merge_size * self.merge_size
        embed = 3 * self.temporal_patch_size * self.patch_size ** 2 * h
        blocks = self.depth * (4 * h * h + 2 * h * self.intermediate)
        merge = self.mergers * ((h * m2) ** 2 + h * m2 * self.out_hidden)
        return float(embed + blocks + merge)

    def flops(self, patches: int) -> float:
        """FLOPs to encode one image of ``patches`` patches (module docstring)."""
        h, m2 = self.hidden, self.merge_size * self.merge_size
        p = float(patches)
        embed = 2 * p * 3 * self.temporal_patch_size * self.patch_size ** 2 * h
        linear = 2 * p * (4 * h * h + 2 * h * self.intermediate)
        attention = 4 * p * p * h
        merge = 2 * (p / m2) * ((h * m2) ** 2 + h * m2 * self.out_hidden)
        return embed + self.depth * (linear + attention) + self.mergers * merge


@cache
def _encoders() -> dict[str, VisionEncoder]:
    out: dict[str, VisionEncoder] = {}
    for r in read_data_csv("vision.csv"):
        out[r["model"]] = VisionEncoder(
            model=r["model"], patch_size=int(r["patch_size"]), merge_size=int(r["merge_size"]),
            temporal_patch_size=int(r["temporal_patch_size"]),
            min_pixels=int(r["min_pixels"]), max_pixels=int(r["max_pixels"]),
            depth=int(r["depth"]), hidden=int(r["hidden"]),
            intermediate=int(r["intermediate"]), heads=int(r["heads"]),
            mergers=int(r["mergers"]), out_hidden=int(r["out_hidden"]),
            markers=int(r["markers"]),
            precision=Precision.parse(r["precision"]) if r.get("precision") else None)
    return out


def vision_encoder(model: ModelArch | str) -> VisionEncoder | None:
    """The model's image processor and encoder, or ``None`` for a text-only model."""
    name = model if isinstance(model, str) else model.name
    return _encoders().get(name)


def data_url_image(url: str) -> ImageInfo:
    """The format and size of the image in a base64 ``data:`` URL, read from its header.

    Decodes 64 base64 characters, then 8 times more each round until the header is
    found (JPEG's size may follow metadata segments) or the whole text is decoded.
    ConfigError names what is wrong (not a data URL, bad base64, not an image).
    """
    if not url.startswith("data:"):
        raise ConfigError("the emulated server reads images from data URLs only "
                          "(data:image/...;base64,...), not from the network")
    comma = url.find(",", 5)
    if comma < 0 or not url[5:comma].lower().endswith(";base64"):
        raise ConfigError("an image data URL must be base64 (data:image/png;base64,...)")
    start = comma + 1
    left = len(url) - start
    take = _PREFIX_CHARS
    while True:
        n = left if take >= left else take - take % 4
        try:
            raw = base64.b64decode(url[start:start + n], validate=True)
        except (binascii.Error, ValueError):
            raise ConfigError("an image data URL holds invalid base64") from None
        info = sniff(raw)
        if info is not None:
            return info
        if n >= left:
            raise ConfigError("an image data URL holds no PNG, JPEG, GIF, WebP or BMP "
                              "image (no size in its header)")
        take *= 8


@dataclass(frozen=True, slots=True)
class PromptImage:
    """One image of a request as the model takes it."""

    width: int
    height: int
    tokens: int  # prompt tokens: image tokens and markers
    flops: float  # encoder work

    @property
    def key(self) -> bytes:
        """What the image adds to the key of the request's output draws: its size."""
        return b"image:%dx%d" % (self.width, self.height)


def prompt_image(enc: VisionEncoder | None, url: str, model: str) -> PromptImage:
    """The image at data URL ``url`` in a request to ``model`` (whose encoder is
    ``enc``). ConfigError: a text-only model, not an image, an impossible size."""
    if enc is None:
        raise ConfigError(f"{model} is not a multimodal model: it takes no images (send "
                          "text only, or serve qwen3-vl-235b-a22b)")
    info = data_url_image(url)
    try:
        patches = enc.patches(info.width, info.height)
    except ValueError as e:
        raise ConfigError(f"image of {info.width} x {info.height}: {e}") from None
    tokens = patches // (enc.merge_size * enc.merge_size) + enc.markers
    return PromptImage(info.width, info.height, tokens, enc.flops(patches))


def chat_images(enc: VisionEncoder | None, messages: Sequence[Message], model: str
                ) -> tuple[int, float, list[bytes]]:
    """The prompt tokens and encoder FLOPs the images of a chat's ``messages`` add, and
    the parts of the key of its output draws (:func:`~tokenmark.perfmodel.outputs.
    prompt_key`: each text, then each image's size), as the emulated servers and the
    simulator read a request. ConfigError as :func:`prompt_image`."""
    parts: list[bytes] = []
    tokens = 0
    flops = 0.0
    for m in messages:
        if not m.images or m.content:
            parts.append(m.content.encode())
        for url in m.images:
            img = prompt_image(enc, url, model)
            tokens += img.tokens
            flops += img.flops
            parts.append(img.key)
    return tokens, flops, parts
