"""Images in a vision-language prompt: the resize rule, tokens per image, encoder work,
and the image size read from a data URL's header.

Ground truth: sizes worked out here by hand from the rule (Qwen3-VL: factor 16 x 2 = 32,
min_pixels 65536, max_pixels 16777216; Python's round() takes halves to the even
multiple), transformers' own ``smart_resize`` where transformers is installed, and
Pillow's reading of the same images."""

from __future__ import annotations

import base64
import io
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tokenmark.errors import ConfigError
from tokenmark.perfmodel.vision import (
    data_url_image,
    prompt_image,
    smart_resize,
    vision_encoder,
)
from tokenmark.workload.images import ImageSize, data_url, generate_png, sniff

QWEN3 = vision_encoder("Qwen3-VL-235B-A22B")


# (width, height) -> (resized width, height, patches, image tokens), by hand:
HAND = [
    # both sides multiples of 32, area within limits: unchanged; 32 x 32 patches / 4
    ((512, 512), (512, 512, 1024, 256)),
    # 640 = 20 x 32, 480 = 15 x 32: unchanged; 40 x 30 patches
    ((640, 480), (640, 480, 1200, 300)),
    # 1001 / 32 = 31.28 -> 31 -> 992; 333 / 32 = 10.41 -> 10 -> 320; 62 x 20 patches
    ((1001, 333), (992, 320, 1240, 310)),
    # 2000 / 32 = 62.5 -> 62 (half to even) -> 1984; 80 / 32 = 2.5 -> 2 -> 64; 124 x 4
    ((2000, 80), (1984, 64, 496, 124)),
    # 60 x 40 rounds to 64 x 32 = 2048 < 65536: beta = sqrt(65536 / 2400) = 5.2256;
    # 60 x 5.2256 = 313.5 -> ceil(9.80) x 32 = 320; 40 x 5.2256 = 209.0 -> 7 x 32 = 224
    ((60, 40), (320, 224, 280, 70)),
    # 8192^2 = 67.1 M > 16.8 M: beta = sqrt(67108864 / 16777216) = 2 -> 4096 x 4096
    ((8192, 8192), (4096, 4096, 65536, 16384)),
    # 5000 / 32 = 156.25 -> 4992; 3000 / 32 = 93.75 -> 94 -> 3008; 15.0 M: within
    ((5000, 3000), (4992, 3008, 58656, 14664)),
]


@pytest.mark.parametrize(("size", "want"), HAND)
def test_qwen3_vl_image_tokens_by_hand(size, want):
    assert QWEN3 is not None
    w, h = size
    rw, rh, patches, tokens = want
    assert QWEN3.resized(w, h) == (rw, rh)
    assert QWEN3.patches(w, h) == patches == (rw // 16) * (rh // 16)
    assert QWEN3.image_tokens(w, h) == tokens == patches // 4
    # <|vision_start|> ... <|vision_end|> around the image's tokens
    assert QWEN3.prompt_tokens(w, h) == tokens + 2


def test_qwen25_vl_figures_and_the_aspect_ratio_limit():
    # Qwen2/2.5-VL: patch 14, merge 2 (factor 28), 3136..12845056 pixels:
    # 512 / 28 = 18.29 -> 18 -> 504; 36 x 36 patches, 324 tokens
    assert smart_resize(512, 512, 28, 3136, 12845056) == (504, 504)
    with pytest.raises(ValueError, match="aspect ratio must be smaller than 200"):
        smart_resize(10, 2010, 32, 65536, 16777216)
    with pytest.raises(ValueError, match="no area"):
        smart_resize(0, 10, 32, 65536, 16777216)


def test_encoder_flops_by_hand():
    # 1024 patches (a 512 x 512 image): patch embedding 2 x 1024 x (3 x 2 x 16 x 16) x
    # 1152; per block 2 x 1024 x (4 x 1152^2 + 2 x 1152 x 4304) + 4 x 1024^2 x 1152;
    # 4 mergers of 2 x 256 x (4608^2 + 4608 x 4096)
    p, h, i = 1024, 1152, 4304
    embed = 2 * p * 1536 * h
    block = 2 * p * (4 * h * h + 2 * h * i) + 4 * p * p * h
    merge = 2 * 256 * (4608 ** 2 + 4608 * 4096)
    assert QWEN3 is not None
    assert QWEN3.flops(1024) == pytest.approx(embed + 27 * block + 4 * merge, rel=1e-12)
    assert QWEN3.flops(1024) == pytest.approx(1.0581e12, rel=1e-4)  # about 1.06 TFLOP
    assert QWEN3.params == pytest.approx(0.5733e9, rel=1e-3)  # about 0.6 B parameters


def test_text_models_have_no_encoder_and_refuse_images():
    assert vision_encoder("Llama-3.1-8B") is None
    png = generate_png(0, 0, ImageSize(64, 64))
    url = data_url(png, sniff(png))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="not a multimodal model"):
        prompt_image(None, url, "llama3.1-8b")
    img = prompt_image(QWEN3, url, "qwen3-vl-235b-a22b")
    # 64 x 64 = 4096 < 65536: beta = 4 -> 256 x 256 -> 256 patches, 64 tokens + 2
    assert (img.width, img.height, img.tokens) == (64, 64, 66)
    assert img.key == b"image:64x64"


def test_matches_transformers_smart_resize():
    mod = pytest.importorskip("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl")

    @settings(max_examples=300, deadline=None)
    @given(st.integers(1, 9000), st.integers(1, 9000),
           st.sampled_from([(32, 65536, 16777216), (28, 3136, 12845056)]))
    def check(h, w, cfg):
        factor, lo, hi = cfg
        if max(h, w) / min(h, w) > 200:
            with pytest.raises(ValueError):
                smart_resize(h, w, factor, lo, hi)
            return
        assert smart_resize(h, w, factor, lo, hi) == tuple(mod.smart_resize(h, w, factor, lo, hi))

    check()


# -- the size from a data URL's header, against a full decode and Pillow -----------------
def _jpeg(w: int, h: int, exif_bytes: int) -> bytes:
    """A JPEG whose size marker comes after ``exif_bytes`` of metadata."""
    image = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    img = image.new("RGB", (w, h), (10, 200, 30))
    if exif_bytes:
        app1 = b"Exif\x00\x00" + b"\x00" * exif_bytes
        img.save(buf, "JPEG", exif=app1)
    else:
        img.save(buf, "JPEG")
    return buf.getvalue()


def _url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


@pytest.mark.parametrize("exif", [0, 40, 3000, 60000])
def test_jpeg_size_found_after_metadata(exif):
    image = pytest.importorskip("PIL.Image")
    data = _jpeg(333, 217, exif)
    info = data_url_image(_url(data, "image/jpeg"))
    with image.open(io.BytesIO(data)) as im:
        assert (info.format, info.width, info.height) == ("jpeg", *im.size) == ("jpeg", 333, 217)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=600), st.sampled_from([b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff",
                                                 b"RIFF\x00\x00\x00\x00WEBPVP8 ", b"BM"]))
def test_prefix_reading_equals_a_full_decode(tail, head):
    """Whatever the bytes, reading a growing prefix finds what sniffing the whole
    decoded image finds, or refuses exactly when that finds nothing."""
    data = head + tail
    full = sniff(data)
    if full is None:
        with pytest.raises(ConfigError):
            data_url_image(_url(data))
    else:
        assert data_url_image(_url(data)) == full


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 3000))
def test_png_sizes_against_pillow(w, h):
    image = pytest.importorskip("PIL.Image")
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(
        ">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    info = data_url_image(_url(header + b"\x00" * 12))
    assert (info.width, info.height) == (w, h)
    png = generate_png(1, 0, ImageSize(min(w, 64), min(h, 64)))
    with image.open(io.BytesIO(png)) as im:
        assert (data_url_image(_url(png)).width, data_url_image(_url(png)).height) == im.size


def test_bad_data_urls_are_refused_with_a_reason():
    with pytest.raises(ConfigError, match="data URLs only"):
        data_url_image("https://example.com/cat.png")
    with pytest.raises(ConfigError, match="must be base64"):
        data_url_image("data:image/png,rawbytes")
    with pytest.raises(ConfigError, match="invalid base64"):
        data_url_image("data:image/png;base64,%%%%not-base64%%%%")
    with pytest.raises(ConfigError, match="no PNG, JPEG"):
        data_url_image(_url(b"hello, world"))


def test_token_counts_scale_with_area():
    assert QWEN3 is not None
    # a 4k photo hits max_pixels: at most 16384 image tokens whatever its size
    assert QWEN3.image_tokens(3840, 2160) <= 16384
    assert QWEN3.image_tokens(3840, 2160) == math.prod(QWEN3.resized(3840, 2160)) // 1024
