"""Images from local files, bytes or data URLs, checked and turned into data URLs.

A dataset names an image as a path (relative to the dataset file's folder), a
``data:image/...;base64,`` URL, raw bytes, or a Hugging Face image cell
(``{"bytes": ..., "path": ...}``, as Parquet exports of image datasets store them). Each
is checked by its header (:func:`~tokenmark.workload.images.sniff`) and, when asked,
decoded in full (:mod:`tokenmark.sources.pil_images`). :class:`FolderImages` serves the
image files of a folder, in name order, to attach to any dataset's samples.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenmark.errors import DatasetError
from tokenmark.workload.images import ImageInfo, data_url, sniff

__all__ = ["FolderImages", "LoadedImage", "load_image"]

_SUFFIXES = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".bmp"}


@dataclass(frozen=True, slots=True)
class LoadedImage:
    url: str  # a data URL
    nbytes: int  # decoded size
    info: ImageInfo


def _checked(data: bytes, what: str, where: str, verify: bool) -> LoadedImage:
    info = sniff(data)
    if info is None:
        raise DatasetError(f"{where}: {what} is not an image (no PNG, JPEG, GIF, WebP or BMP "
                           "header); give an image file in one of those formats")
    if verify:
        from tokenmark.sources.pil_images import verify_decodes

        verify_decodes(data, f"{where}: {what}")
    return LoadedImage(data_url(data, info), len(data), info)


def load_image(value: Any, base: Path, where: str, *, verify: bool = False) -> LoadedImage:
    """One image from a dataset cell (path, data URL, bytes, or ``{"bytes", "path"}``)."""
    if isinstance(value, dict):
        raw = value.get("bytes")
        if raw:
            return _checked(bytes(raw), "the image bytes", where, verify)
        value = value.get("path")
    if isinstance(value, bytes | bytearray | memoryview):
        return _checked(bytes(value), "the image bytes", where, verify)
    if not isinstance(value, str) or not value:
        raise DatasetError(f"{where}: the image cell is empty or not a path, data URL or "
                           "bytes; give one of those")
    if value.startswith("data:"):
        head, _, body = value.partition(",")
        if ";base64" not in head:
            raise DatasetError(f"{where}: the image data URL is not base64; encode it as "
                               "data:image/png;base64,...")
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise DatasetError(f"{where}: the image data URL is not valid base64") from None
        return _checked(data, "the image data URL", where, verify)
    path = Path(value.removeprefix("file://"))
    if not path.is_absolute():
        path = base / path
    if not path.is_file():
        raise DatasetError(f"{where}: no image file {str(path)!r}; paths are relative to the "
                           "dataset file's folder (images are never downloaded)")
    return _checked(path.read_bytes(), f"{str(path)!r}", where, verify)


class FolderImages:
    """The image files of a folder (by name order), checked once, read when used."""

    def __init__(self, folder: Path | str, *, verify: bool = False) -> None:
        d = Path(folder)
        if not d.is_dir():
            raise DatasetError(f"{d}: no such folder; give a folder of image files")
        files = sorted(p for p in d.iterdir() if p.suffix.lower() in _SUFFIXES)
        if not files:
            raise DatasetError(f"{d}: no image files (.png, .jpg, .gif, .webp, .bmp) in it")
        for p in files:
            _checked(p.read_bytes(), f"{p.name!r}", str(d), verify)
        self.folder = d
        self.files = files

    @property
    def name(self) -> str:
        return f"folder:{self.folder}"

    def __len__(self) -> int:
        return len(self.files)

    def image(self, k: int) -> tuple[bytes, ImageInfo]:
        data = self.files[k % len(self.files)].read_bytes()
        info = sniff(data)
        if info is None:  # changed on disk since it was checked
            raise DatasetError(f"{self.files[k % len(self.files)]}: no longer an image")
        return data, info
