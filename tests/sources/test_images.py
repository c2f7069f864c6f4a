"""Images for multimodal requests: recognised by header, generated deterministically,
attached to any dataset, refused clearly when they are not images."""

from __future__ import annotations

import base64
import io

import pytest

from tokenmark.dataset import LengthDistribution, SyntheticDataset
from tokenmark.errors import DatasetError
from tokenmark.sources.image_files import FolderImages, load_image
from tokenmark.workload.images import ImageSize, generate_png, sniff
from tokenmark.workload.multimodal import GeneratedImages, ImageDataset

PIL = pytest.importorskip("PIL.Image")


def encoded(fmt: str, size=(33, 21)) -> bytes:
    buf = io.BytesIO()
    PIL.new("RGB", size, (10, 200, 30)).save(buf, format=fmt)
    return buf.getvalue()


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP", "BMP"])
def test_sniff_reads_format_and_size_of_real_files(fmt):
    info = sniff(encoded(fmt))
    assert info is not None and (info.width, info.height) == (33, 21)
    assert info.format == fmt.lower() and info.mime.startswith("image/")


@pytest.mark.parametrize("data", [b"", b"hello world", b"%PDF-1.7\n", b"\x89PNG\r\n\x1a\n",
                                  b"GIF89a\x00\x00\x00\x00"])
def test_sniff_refuses_what_is_not_an_image(data):
    assert sniff(data) is None


def test_generated_images_are_deterministic_valid_pngs():
    a = generate_png(7, 3, ImageSize(64, 40))
    assert a == generate_png(7, 3, ImageSize(64, 40)) != generate_png(7, 4, ImageSize(64, 40))
    with PIL.open(io.BytesIO(a)) as im:
        im.load()
        assert im.size == (64, 40) and im.mode == "RGB"
    assert ImageSize.parse("512x384") == ImageSize(512, 384)
    for bad in ("512", "0x5", "axb", "9000x10"):
        with pytest.raises(DatasetError, match="WIDTHxHEIGHT"):
            ImageSize.parse(bad)


def test_image_dataset_counts_images_and_bytes():
    base = SyntheticDataset(4, LengthDistribution.parse("6"), LengthDistribution.parse("3"))
    ds = ImageDataset(base, GeneratedImages(ImageSize(32, 32), seed=1), images_per_sample=2)
    s = ds.sample(1)
    (m,) = s.messages or ()
    assert s.is_chat and s.images == 2 and len(m.images) == 2
    raw = [base64.b64decode(u.split(",", 1)[1]) for u in m.images]
    assert s.image_bytes == sum(map(len, raw)) and raw[0] != raw[1]
    assert m.content == base.sample(1).prompt and s.input_tokens == 6
    d = ds.describe()
    assert d["images"] == 8 and d["images_per_sample"] == 2 and d["tokenizer"]
    with pytest.raises(DatasetError, match="at least 1"):
        ImageDataset(base, GeneratedImages(ImageSize(8, 8)), images_per_sample=0)


def test_folder_images_and_truncated_files(tmp_path):
    (tmp_path / "a.jpg").write_bytes(encoded("JPEG"))
    (tmp_path / "b.png").write_bytes(encoded("PNG"))
    (tmp_path / "notes.txt").write_text("ignored")
    imgs = FolderImages(tmp_path)
    assert len(imgs) == 2 and imgs.image(3)[1].format == "png"
    cut = encoded("JPEG", (200, 200))[:300]
    (tmp_path / "cut.jpg").write_bytes(cut)
    assert load_image("cut.jpg", tmp_path, "f line 1").info.format == "jpeg"  # header ok
    with pytest.raises(DatasetError, match=r"f line 1: .*does not decode"):
        load_image("cut.jpg", tmp_path, "f line 1", verify=True)
    (tmp_path / "fake.png").write_text("not really")
    with pytest.raises(DatasetError, match=r"fake\.png'? is not an image"):
        FolderImages(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DatasetError, match="no image files"):
        FolderImages(tmp_path / "empty")
    with pytest.raises(DatasetError, match="not valid base64"):
        load_image("data:image/png;base64,@@@", tmp_path, "w")


class _Counting:
    """An image source that counts the images it has made."""

    def __init__(self, inner: GeneratedImages) -> None:
        self.inner = inner
        self.made = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def image(self, k: int):
        self.made += 1
        return self.inner.image(k)


def test_images_are_made_before_the_clock_starts_not_at_send_time(demo_server):
    """LoadGen loads the sample set before the timed run: a 512 x 512 PNG costs ~25 ms of
    CPU, which made at send time delayed the sends behind it (Qwen3-VL's send lag)."""
    from tokenmark.adapters.inprocess import LatencyModel, LatencyModelSUT
    from tokenmark.clock import FakeClock, run_virtual
    from tokenmark.loadgen.runner import Runner
    from tokenmark.mlperf.scenarios import build_schedule
    from tokenmark.mlperf.settings import effective

    base = SyntheticDataset(256, LengthDistribution.parse("6"), LengthDistribution.parse("3"))
    src = _Counting(GeneratedImages(ImageSize(8, 8), seed=2))
    ds = ImageDataset(base, src, images_per_sample=2)
    sched = build_schedule(effective(demo_server.settings, len(ds)), len(ds))
    clock = FakeClock()
    sut = LatencyModelSUT(clock, LatencyModel())
    made_at_sends: list[int] = []
    issue = sut.issue

    def counting_issue(query, handle):
        made_at_sends.append(src.made)
        issue(query, handle)

    sut.issue = counting_issue  # type: ignore[method-assign]
    run_virtual(Runner(sched, ds, sut, clock).run(), clock)
    used = len(set(sched.sample_index.tolist()) | set(sched.loaded_set))
    assert len(made_at_sends) == len(sched) > used  # samples are sent more than once
    assert set(made_at_sends) == {2 * used}  # every image made before the first send
    assert src.made == 2 * used  # and none made again
