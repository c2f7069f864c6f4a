"""Multimodal chat requests: any dataset's prompts with images attached.

:class:`ImageDataset` turns each sample of a base dataset into one chat message (the
prompt's text, then ``images_per_sample`` images as data URLs), as the MLPerf Qwen3-VL
harness sends product photos. Images come from an :class:`ImageSource`: generated
(:class:`GeneratedImages`, image *k* seeded by ``derive_seed(seed, f"image/{k}")``,
so every request carries images no server has seen before, as a real stream would) or
the files of a folder (:class:`tokenmark.sources.image_files.FolderImages`, reused in
turn). Sample *i* gets images ``i * images_per_sample + j``.

Counting: ``input_tokens`` stays the base prompt's text count (a server turns images
into a model-specific number of tokens, which its ``usage`` reports); each sample says
how many images it holds and their size in bytes, and :meth:`ImageDataset.describe`
totals them, so results can show the image load beside the token load.
"""

from __future__ import annotations

import functools
import hashlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol

from tokenmark.dataset import Dataset, describe_dataset
from tokenmark.errors import DatasetError
from tokenmark.records import Message, Sample
from tokenmark.workload.images import ImageInfo, ImageSize, data_url, generate_png

__all__ = ["GeneratedImages", "ImageDataset", "ImageSource"]

_CACHE = 256  # samples (each holds its images' data URLs once built)
_LOAD_BYTES = 1 << 30  # load_samples keeps at most this much image data in memory


class ImageSource(Protocol):
    @property
    def name(self) -> str: ...

    def image(self, k: int) -> tuple[bytes, ImageInfo]:
        """Image ``k`` (any k >= 0; finite sources repeat)."""
        ...


class GeneratedImages:
    """Deterministic PNGs of one size, all different."""

    def __init__(self, size: ImageSize, seed: int = 0) -> None:
        self.size = size
        self.seed = seed

    @property
    def name(self) -> str:
        return f"generated:{self.size}:seed={self.seed}"

    @functools.lru_cache(maxsize=64)  # noqa: B019 - a handful of images, per source
    def image(self, k: int) -> tuple[bytes, ImageInfo]:
        data = generate_png(self.seed, k, self.size)
        return data, ImageInfo("png", self.size.width, self.size.height)


class ImageDataset:
    """``base``'s samples as chat requests carrying ``images_per_sample`` images each."""

    def __init__(self, base: Dataset, images: ImageSource, images_per_sample: int = 1) -> None:
        if images_per_sample < 1:
            raise DatasetError(f"images per sample must be at least 1 (got "
                               f"{images_per_sample}); drop the image option for text only")
        self._base = base
        self._src = images
        self._per = images_per_sample
        self._cache: OrderedDict[int, Sample] = OrderedDict()
        self._keep = _CACHE
        self._bytes: dict[int, int] = {}

    @property
    def name(self) -> str:
        return f"{self._base.name} + images({self._src.name}, {self._per}/sample)"

    @property
    def fingerprint(self) -> str:
        h = hashlib.sha256(self._base.fingerprint.encode())
        h.update(f"{self._src.name}/{self._per}".encode())
        return h.hexdigest()[:16]

    def describe(self) -> dict[str, object]:
        inner = describe_dataset(self._base)
        sizes = list(self._bytes.values())
        return {**inner, "dataset": self.name, "fingerprint": self.fingerprint,
                "samples": len(self), "images": len(self) * self._per,
                "images_per_sample": self._per, "image_source": self._src.name,
                "image_bytes_mean_built": sum(sizes) / len(sizes) if sizes else None}

    def __len__(self) -> int:
        return len(self._base)

    def _images(self, index: int) -> list[tuple[bytes, ImageInfo]]:
        return [self._src.image(index * self._per + j) for j in range(self._per)]

    def _make(self, index: int, images: list[tuple[bytes, ImageInfo]]
              ) -> tuple[str, tuple[int, ...] | None, tuple[Message, ...]]:
        s = self._base.sample(index)
        urls = tuple(data_url(d, info) for d, info in images)
        return s.prompt, s.token_ids, (Message("user", s.prompt, urls),)

    def sample(self, index: int) -> Sample:
        cached = self._cache.get(index)
        if cached is not None:
            self._cache.move_to_end(index)
            return cached
        base = self._base.sample(index)
        images = self._images(index)  # made now: their size is a fact of the sample
        nbytes = sum(len(d) for d, _ in images)
        self._bytes[index] = nbytes
        s = Sample(index, None, base.input_tokens, base.output_tokens,
                   make_chat=functools.partial(self._make, index, images),
                   images=self._per, image_bytes=nbytes,
                   expected_output_tokens=base.expected_output_tokens)
        self._cache[index] = s
        if len(self._cache) > self._keep:
            self._cache.popitem(last=False)
        return s

    def load_samples(self, indices: Sequence[int]) -> None:
        """Make the images of these samples before the run (a 512 x 512 PNG costs ~25 ms
        of CPU, which at send time would delay the sends behind it), keeping all of them
        while their images total at most 1 GiB; later ones are made when sent."""
        total = 0
        for n, i in enumerate(dict.fromkeys(indices)):
            self._keep = max(self._keep, n + 1)
            total += self._bytes.get(i) or self.sample(i).image_bytes
            if total > _LOAD_BYTES:
                self._keep = max(_CACHE, n)
                break
