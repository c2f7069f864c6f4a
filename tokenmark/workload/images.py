"""Images for multimodal chat requests: recognise them, make them, describe them.

An image is sent as a data URL inside a chat message (``data:image/png;base64,...``),
as the MLPerf Qwen3-VL harness sends its product photos. :func:`sniff` recognises the
formats servers accept (PNG, JPEG, GIF, WebP, BMP) from their magic bytes and reads the
size from the header, so a file that is not an image is refused before the run, with no
third-party decoder; a full decode (which also catches truncated files) is an optional
edge step (:mod:`tokenmark.sources.pil_images`).

:func:`generate_png` makes a deterministic image (seeded tiles over a colour ramp, which
compresses about as well as a photo) from ``derive_seed(seed, f"image/{index}")`` with
the standard library's zlib, so generated image sets are identical on every machine.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from tokenmark.errors import DatasetError
from tokenmark.mlperf.settings import derive_seed

__all__ = ["ImageInfo", "ImageSize", "data_url", "generate_png", "sniff"]

_MIME = {"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif",
         "webp": "image/webp", "bmp": "image/bmp"}


@dataclass(frozen=True, slots=True)
class ImageInfo:
    format: str  # png | jpeg | gif | webp | bmp
    width: int
    height: int

    @property
    def mime(self) -> str:
        return _MIME[self.format]


def sniff(data: bytes) -> ImageInfo | None:
    """The image's format and size from its header, or ``None`` if it is not one."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        w, h = struct.unpack(">II", data[16:24])
        return ImageInfo("png", w, h) if w and h else None
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        w, h = struct.unpack("<HH", data[6:10])
        return ImageInfo("gif", w, h) if w and h else None
    if data.startswith(b"\xff\xd8\xff"):
        return _jpeg(data)
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp(data)
    if data[:2] == b"BM" and len(data) >= 26:
        w, h = struct.unpack("<ii", data[18:26])
        return ImageInfo("bmp", abs(w), abs(h)) if w and h else None
    return None


def _jpeg(data: bytes) -> ImageInfo | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        (seg,) = struct.unpack(">H", data[i + 2:i + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return ImageInfo("jpeg", w, h) if w and h else None
        i += 2 + seg
    return None


def _webp(data: bytes) -> ImageInfo | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and len(data) >= 30:
        w, h = struct.unpack("<HH", data[26:30])
        return ImageInfo("webp", w & 0x3FFF, h & 0x3FFF)
    if chunk == b"VP8L" and len(data) >= 25:
        b = int.from_bytes(data[21:25], "little")
        return ImageInfo("webp", (b & 0x3FFF) + 1, ((b >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(data) >= 30:
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return ImageInfo("webp", w, h)
    return None


def data_url(data: bytes, info: ImageInfo) -> str:
    """``data:<mime>;base64,<data>``, the form OpenAI-compatible servers accept."""
    return f"data:{info.mime};base64,{base64.b64encode(data).decode('ascii')}"


@dataclass(frozen=True, slots=True)
class ImageSize:
    """``WIDTHxHEIGHT`` of generated images, e.g. ``512x512``."""

    width: int
    height: int

    @classmethod
    def parse(cls, text: str) -> ImageSize:
        w, sep, h = text.lower().partition("x")
        try:
            size = cls(int(w), int(h))
        except ValueError:
            size = cls(0, 0)
        if not sep or not (0 < size.width <= 8192 and 0 < size.height <= 8192):
            raise DatasetError(
                f"cannot read the image size {text!r}; write WIDTHxHEIGHT with each side "
                "from 1 to 8192 pixels, e.g. 512x512"
            )
        return size

    def __str__(self) -> str:
        return f"{self.width}x{self.height}"


def generate_png(seed: int, index: int, size: ImageSize) -> bytes:
    """A deterministic RGB PNG: image ``index`` of the set seeded by ``seed``.

    Random 4x4-pixel tiles over a colour ramp: enough detail that encoders and vision
    towers cannot shortcut it, about photo-sized once compressed (~1.3 bytes per pixel),
    and fast to make (a few ms for 512x512).
    """
    rng = np.random.default_rng(derive_seed(seed, f"image/{index}"))
    w, h = size.width, size.height
    tw, th = -(-w // 4), -(-h // 4)
    tiles = rng.integers(0, 96, size=(th, tw, 3), dtype=np.uint8)
    pixels = np.repeat(np.repeat(tiles, 4, axis=0), 4, axis=1)[:h, :w]
    ramp = (np.arange(w, dtype=np.uint16) * 159 // max(w - 1, 1)).astype(np.uint8)
    pixels[:, :, int(rng.integers(0, 3))] += ramp[np.newaxis, :]
    raw = np.concatenate([np.zeros((h, 1), dtype=np.uint8), pixels.reshape(h, w * 3)], axis=1)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), 1)) + chunk(b"IEND", b""))
