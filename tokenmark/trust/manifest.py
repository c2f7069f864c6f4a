"""Workload manifests: everything that determines a run's request stream, with a hash.

A manifest (``manifest.json`` in every results folder, schema ``tokenmark.manifest/1``)
holds, in canonical JSON (:mod:`tokenmark.trust.canonical`):

- ``settings``: the layered test settings (round, benchmark, scenario, rates, limits,
  the four seeds, the profile, the mode) exactly as the run used them;
- ``preset``: the round and benchmark and a hash of that preset;
- ``workload``: how the dataset was made or read (every option of
  :class:`~tokenmark.api.assemble.WorkloadSpec`), and the SHA-256 and size of each file it
  read (dataset, trace, chat template, tokenizer files, image folder);
- ``dataset`` / ``tokenizer``: the built dataset's size and content fingerprint, the
  tokenizer's name and fingerprint;
- ``sampling``: what every request carries besides the prompt (API kind, streaming,
  ``max_tokens``, ``ignore_eos``, temperature, the extra body, the model name asked for);
- ``schedule``: the kind and length of the precomputed schedule and the SHA-256 of its
  ``(sample, query, scheduled time)`` arrays.

``sha256`` is the hash of the canonical ``content``; a file whose content no longer
hashes to it was edited and is refused. Re-running a manifest (``tokenmark run
--manifest``) rebuilds settings and workload from it and checks, before any request is
sent, that every file, the dataset and tokenizer fingerprints and the schedule hash are
what the manifest says: a dataset that changed is an error naming the file.

The issued-request hash (:class:`IssuedHash`) proves two results sent the same requests:
SHA-256 over the little-endian int64 rows ``(seq, query, sample, scheduled_ns,
input_tokens)`` of every request actually sent, in ``seq`` order (``scheduled_ns`` is 0
for closed loops, whose send times depend on the server).
"""

from __future__ import annotations

import dataclasses
import json
from array import array
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np

from tokenmark import __version__
from tokenmark.adapters.openai_target import OpenAIConfig
from tokenmark.config.layering import Layer, LayeredSettings
from tokenmark.dataset import Dataset, describe_dataset
from tokenmark.errors import ConfigError, DatasetError
from tokenmark.inputs import MIB, json_loads, read_bounded
from tokenmark.metrics.summary import Summary
from tokenmark.mlperf.presets import BenchmarkPreset, resolve
from tokenmark.mlperf.rules import Finding
from tokenmark.mlperf.scenarios import Schedule, ScheduleKind
from tokenmark.mlperf.settings import (
    EffectiveSettings,
    LatencyLimits,
    Mode,
    Scenario,
    Seeds,
    TestSettings,
)
from tokenmark.records import RequestRecord
from tokenmark.trust.canonical import canonical_bytes, file_sha256, plain, sha256_hex

__all__ = [
    "MANIFEST_FILE",
    "SCHEMA",
    "IssuedHash",
    "Manifest",
    "ManifestWatcher",
    "Sampling",
    "build_content",
    "check_dataset",
    "check_files",
    "issued_hash_of_records",
    "load_manifest",
    "preset_sha256",
    "schedule_section",
    "settings_from_json",
    "spec_from_json",
]

SCHEMA: Final = "tokenmark.manifest/1"
MANIFEST_FILE: Final = "manifest.json"
#: WorkloadSpec fields that name files or folders the manifest hashes.
FILE_FIELDS: Final = ("dataset", "trace", "chat_template_file", "image_dir")


@dataclass(frozen=True)
class Sampling:
    """What every request carries besides its prompt (HTTP targets)."""

    api: str = "completions"
    stream: bool = True
    include_usage: bool = True
    max_tokens: int = 0
    ignore_eos: bool = False
    temperature: float | None = None
    extra_body: str = ""
    model: str = ""

    @classmethod
    def of(cls, cfg: OpenAIConfig) -> Sampling:
        return cls(api=cfg.api, stream=cfg.stream, include_usage=cfg.include_usage,
                   max_tokens=cfg.max_tokens, ignore_eos=cfg.ignore_eos,
                   temperature=cfg.temperature, extra_body=cfg.extra_body, model=cfg.model)

    def apply(self, cfg: OpenAIConfig) -> OpenAIConfig:
        """``cfg`` with these sampling parameters (the target's own options kept)."""
        return dataclasses.replace(
            cfg, api=self.api, stream=self.stream, include_usage=self.include_usage,
            max_tokens=self.max_tokens, ignore_eos=self.ignore_eos,
            temperature=self.temperature, extra_body=self.extra_body,
            model=self.model or cfg.model)


@dataclass(frozen=True)
class Manifest:
    content: Mapping[str, Any]
    #: Where it was read from ("" when made by this run).
    source: str = ""
    #: The tokenmark version that wrote it (kept outside the hashed content).
    written_by: str = __version__
    sha256: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha256", sha256_hex(canonical_bytes(self.content)))

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "sha256": self.sha256, "written_by": self.written_by,
                "content": plain(self.content)}

    def write(self, path: Path) -> None:
        """Write atomically (a temporary file renamed over ``path``)."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1, sort_keys=True) + "\n",
                       encoding="utf-8")
        tmp.replace(path)

    @property
    def settings(self) -> TestSettings:
        return settings_from_json(self.content["settings"], self.source)

    @property
    def spec(self) -> dict[str, Any]:
        """The workload options (``WorkloadSpec`` fields; paths as :class:`Path`)."""
        return spec_from_json(self.content["workload"]["spec"], self.source)

    @property
    def sampling(self) -> Sampling | None:
        s = self.content.get("sampling")
        return None if s is None else Sampling(**s)

    def layered(self) -> LayeredSettings:
        s = self.settings
        preset, _ = resolve(s.round, s.benchmark)
        return LayeredSettings(s, preset, (Layer(f"manifest {self.sha256[:16]}",
                                                 {"manifest_sha256": self.sha256}),))


# -- settings and workload as JSON ------------------------------------------------------


def settings_json(s: TestSettings) -> dict[str, Any]:
    d: dict[str, Any] = plain(s)
    return d


def settings_from_json(d: Any, where: str = "manifest") -> TestSettings:
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: 'settings' is not an object; regenerate the manifest")
    names = {f.name for f in dataclasses.fields(TestSettings)}
    unknown = sorted(set(d) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown settings {', '.join(unknown)} (made by a newer "
                          "tokenmark?); run it with the tokenmark version that wrote it")
    try:
        v = dict(d)
        v["scenario"] = Scenario(v["scenario"])
        v["mode"] = Mode(v.get("mode", Mode.PERFORMANCE.value))
        v["seeds"] = Seeds(**v["seeds"])
        v["limits"] = LatencyLimits(**v.get("limits", {}))
        return TestSettings(**v)
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"{where}: settings cannot be read ({e}); regenerate the "
                          "manifest") from None


def spec_from_json(d: Any, where: str = "manifest") -> dict[str, Any]:
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: 'workload.spec' is not an object; regenerate it")
    v = dict(d)
    for k in FILE_FIELDS:
        if v.get(k) is not None:
            v[k] = Path(v[k])
    return v


def preset_sha256(preset: BenchmarkPreset) -> str:
    return sha256_hex(canonical_bytes(preset))


def _tokenizer_files(name: str) -> list[Path]:
    if name in ("", "builtin"):
        return []
    p = Path(name)
    if p.is_file():
        return [p]
    if p.is_dir():
        return sorted(q for q in p.iterdir() if q.is_file() and (
            q.name.startswith("tokenizer") or q.name in ("vocab.json", "merges.txt",
                                                         "special_tokens_map.json")))
    return []


def _files(spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Role -> {path, sha256, bytes} of every file the workload reads."""
    out: dict[str, dict[str, Any]] = {}
    for role in FILE_FIELDS:
        p = spec.get(role)
        if p is None:
            continue
        p = Path(p)
        if p.is_dir():
            for q in sorted(x for x in p.rglob("*") if x.is_file()):
                out[f"{role}/{q.relative_to(p).as_posix()}"] = _entry(q)
        elif p.is_file():
            out[role] = _entry(p)
    for q in _tokenizer_files(str(spec.get("tokenizer", ""))):
        out[f"tokenizer/{q.name}"] = _entry(q)
    return out


def _entry(p: Path) -> dict[str, Any]:
    return {"path": str(p), "sha256": file_sha256(p), "bytes": p.stat().st_size}


def build_content(layered: LayeredSettings, spec: Any, dataset: Dataset,
                  sampling: Sampling | None) -> dict[str, Any]:
    """The manifest's content without its schedule section (see :func:`schedule_section`).
    ``spec`` is the run's :class:`~tokenmark.api.assemble.WorkloadSpec`."""
    spec_d: dict[str, Any] = plain(spec)
    desc = describe_dataset(dataset)
    preset = layered.preset
    return {
        "settings": settings_json(layered.settings),
        "preset": {"round": preset.round, "benchmark": preset.name,
                   "sha256": preset_sha256(preset)},
        "workload": {"spec": spec_d, "files": _files(spec_from_json(spec_d))},
        "dataset": {"name": dataset.name, "samples": len(dataset),
                    "fingerprint": dataset.fingerprint},
        "tokenizer": {"name": desc.get("tokenizer"),
                      "fingerprint": desc.get("tokenizer_fingerprint")},
        "sampling": None if sampling is None else plain(sampling),
    }


def schedule_section(schedule: Schedule) -> dict[str, Any]:
    h = _arrays_sha256(schedule.sample_index, schedule.query_id, schedule.scheduled_ns)
    return {"kind": schedule.kind.value, "scenario": schedule.scenario.value,
            "samples": len(schedule), "sha256": h}


def _arrays_sha256(*cols: np.ndarray) -> str:
    if not cols or cols[0].size == 0:
        return sha256_hex(b"")
    table = np.stack([np.asarray(c, dtype="<i8") for c in cols], axis=1)
    return sha256_hex(np.ascontiguousarray(table).tobytes())


# -- reading and checking ---------------------------------------------------------------


def load_manifest(path: Path) -> Manifest:
    """Read ``path`` (a manifest.json, or a results folder holding one); check its hash."""
    p = path / MANIFEST_FILE if path.is_dir() else path
    try:
        doc = json_loads(read_bounded(p, 64 * MIB))
    except FileNotFoundError:
        raise ConfigError(f"no manifest at {p}; give a manifest.json or a results folder "
                          "holding one") from None
    except (OSError, ValueError) as e:  # unreadable, not UTF-8 JSON, too large or deep
        raise ConfigError(f"cannot read the manifest {p} ({e}); give the manifest.json a "
                          "run wrote") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        got = doc.get("schema") if isinstance(doc, dict) else None
        raise ConfigError(f"{p} is not a tokenmark manifest (schema {got!r}, expected "
                          f"{SCHEMA!r})")
    content = doc.get("content")
    if not isinstance(content, dict) or not all(
            k in content for k in ("settings", "workload", "dataset", "schedule")):
        raise ConfigError(f"{p} lacks settings, workload, dataset or schedule; regenerate it")
    try:
        m = Manifest(content, source=str(p), written_by=str(doc.get("written_by", "")))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{p} holds values without a canonical form ({e})") from None
    if doc.get("sha256") != m.sha256:
        raise ConfigError(f"{p} was edited: its content hashes to {m.sha256[:16]}..., the "
                          f"file says {str(doc.get('sha256'))[:16]}...; use the manifest as "
                          "the run wrote it")
    return m


def check_files(m: Manifest, spec: dict[str, Any]) -> dict[str, Any]:
    """Check every file the manifest hashed; return ``spec`` with paths found.

    A path that does not exist as recorded is looked for beside the manifest. A file
    whose content differs raises :class:`DatasetError` naming it.
    """
    files: Mapping[str, Any] = m.content["workload"].get("files", {})
    base = Path(m.source).parent if m.source else Path(".")
    changes: dict[str, Path] = {}
    for role in FILE_FIELDS:
        p = spec.get(role)
        if p is None:
            continue
        if not Path(p).exists() and (base / Path(p).name).exists():
            changes[role] = base / Path(p).name
    spec = {**spec, **changes}
    for role, entry in sorted(files.items()):
        top = role.split("/", 1)[0]
        where: Path | None
        if top == "tokenizer":
            where = _tokenizer_path(str(spec.get("tokenizer", "")), role.split("/", 1)[1])
        elif spec.get(top) is None:
            where = None
        elif "/" in role:
            where = Path(spec[top]) / role.split("/", 1)[1]
        else:
            where = Path(spec[top])
        if where is None or not where.is_file():
            raise DatasetError(f"the manifest's {role} file {entry['path']} is missing; "
                               f"put it back or relocate it with --{_flag(top)} PATH")
        got = file_sha256(where)
        if got != entry["sha256"]:
            raise DatasetError(
                f"the {role} file {where} no longer matches the manifest (sha256 "
                f"{got[:16]}... now, {str(entry['sha256'])[:16]}... in the manifest); "
                "restore the file the manifest was made from")
    return spec


def _flag(role: str) -> str:
    return {"chat_template_file": "chat-template-file", "image_dir": "image-dir"}.get(
        role, role)


def _tokenizer_path(name: str, file: str) -> Path | None:
    p = Path(name)
    if p.is_file():
        return p if p.name == file else None
    return p / file if p.is_dir() else None


def check_dataset(m: Manifest, dataset: Dataset) -> None:
    """Raise DatasetError unless ``dataset`` is the one the manifest describes."""
    want = m.content["dataset"]
    if len(dataset) != want.get("samples"):
        raise DatasetError(f"the dataset has {len(dataset)} samples, the manifest "
                           f"{want.get('samples')}; restore the dataset it was made from")
    tok = m.content.get("tokenizer") or {}
    desc = describe_dataset(dataset)
    if tok.get("fingerprint") and desc.get("tokenizer_fingerprint") != tok["fingerprint"]:
        raise DatasetError(f"the tokenizer {desc.get('tokenizer')} differs from the "
                           f"manifest's {tok.get('name')} (fingerprint "
                           f"{desc.get('tokenizer_fingerprint')} vs {tok['fingerprint']}); "
                           "give the tokenizer the manifest was made with")
    if dataset.fingerprint != want.get("fingerprint"):
        raise DatasetError(f"the dataset {dataset.name} no longer matches the manifest "
                           f"(fingerprint {dataset.fingerprint[:16]}... vs "
                           f"{str(want.get('fingerprint'))[:16]}...); restore the dataset "
                           "the manifest was made from")


# -- the requests actually issued -------------------------------------------------------


class IssuedHash:
    """Collects every issued request and hashes them in ``seq`` order (bounded memory:
    five int64 per request)."""

    def __init__(self, timed: bool) -> None:
        self.timed = timed
        self._rows = array("q")

    def add(self, r: RequestRecord) -> None:
        if r.issued_ns < 0:
            return  # never sent
        self._rows.extend((r.seq, r.query_id, r.sample_index,
                           r.scheduled_ns if self.timed else 0, r.input_tokens))

    @property
    def count(self) -> int:
        return len(self._rows) // 5

    def sha256(self) -> str:
        if not self._rows:
            return sha256_hex(b"")
        arr = np.frombuffer(self._rows, dtype=np.int64).reshape(-1, 5).astype("<i8")
        arr = arr[np.argsort(arr[:, 0], kind="stable")]
        return sha256_hex(np.ascontiguousarray(arr).tobytes())


def issued_hash_of_records(records: Any, kind: ScheduleKind | str) -> tuple[str, int]:
    """The issued-request hash and count of records read back (``read_records``)."""
    h = IssuedHash(timed=ScheduleKind(kind) is ScheduleKind.TIMED)
    for r in records:
        h.add(r)
    return h.sha256(), h.count


class ManifestWatcher:
    """A :class:`~tokenmark.api.run.RunWatcher`: finishes the manifest with the schedule's
    hash (checking it against a manifest being re-run), writes ``manifest.json`` into
    the results folder, and records the manifest hash and the issued-request hash."""

    key = "manifest"

    def __init__(self, content: Mapping[str, Any] | None = None, *,
                 loaded: Manifest | None = None) -> None:
        if (content is None) == (loaded is None):
            raise ValueError("give the content of a new manifest or a loaded one")
        self._content = content
        self.loaded = loaded
        self.manifest: Manifest | None = None
        self.issued = IssuedHash(timed=True)

    def plan(self, eff: EffectiveSettings, schedule: Schedule) -> None:
        section = schedule_section(schedule)
        if self.loaded is not None:
            want = self.loaded.content.get("schedule") or {}
            if want.get("sha256") != section["sha256"] or want.get("samples") != len(schedule):
                raise ConfigError(
                    f"the schedule built from the manifest ({section['samples']} samples, "
                    f"sha256 {section['sha256'][:16]}...) differs from the one it records "
                    f"({want.get('samples')} samples, sha256 {str(want.get('sha256'))[:16]}"
                    "...); run it with the tokenmark version that wrote it "
                    f"({self.loaded.written_by or 'unknown'})")
            self.manifest = self.loaded
        else:
            assert self._content is not None
            self.manifest = Manifest({**self._content, "schedule": section})
        self.issued = IssuedHash(timed=schedule.kind is ScheduleKind.TIMED)

    async def start(self, output_dir: Path) -> None:
        assert self.manifest is not None
        self.manifest.write(output_dir / MANIFEST_FILE)

    def record(self, rec: RequestRecord) -> None:
        self.issued.add(rec)

    async def stop(self) -> None:
        pass

    def finish(self, summary: Summary, output_dir: Path
               ) -> tuple[dict[str, Any], list[Finding]]:
        assert self.manifest is not None
        return {
            "sha256": self.manifest.sha256,
            "file": MANIFEST_FILE,
            "reran_from": self.loaded.source if self.loaded is not None else "",
            "schedule_sha256": self.manifest.content["schedule"]["sha256"],
            "issued_sha256": self.issued.sha256(),
            "issued_requests": self.issued.count,
            "issued_hash_definition": "sha256 of int64 LE rows (seq, query, sample, "
            "scheduled_ns or 0 for closed loops, input_tokens) in seq order",
        }, []
