"""Accelerator, processor, system and submitter names as published, normalised.

Published results spell one piece of hardware several ways (``Intel(R) Arc Pro(R) B70``
in v6.0, ``Intel(R) Arc(TM) Pro B70`` in v6.1; ``[MAXSUN] MS-Intel Arc Pro B60 Dual``
in v5.1, ``MS-Intel Arc Pro B60 Dual`` in v6.0), and some systems hold more than one
kind of accelerator (``NVIDIA H200-SXM-141GB + AMD Instinct MI350X 288GB HBM3e``).
This module says what hardware a name is, so that analyses pair the same hardware
across rounds and never count a mixed system as one vendor's. It is pure (standard
library only, no SQL, no files): the analyses, the importer and the simulator use it.

How a name is read (:func:`accelerator`):

1. The spelling rules: trademark marks (``(R)``, ``(TM)``, ``®``, ``™``) and a leading
   board-maker tag in brackets (``[MAXSUN]``) are dropped, space is collapsed.
2. The alias table (:data:`ACCELERATOR_ALIASES`): a spelling the rules cannot join is
   mapped to the name it shares hardware with, each entry with its reason.
3. Parts: a name listing several accelerators (joined by ``+``, ``,`` or ``and``, with
   ``(xN)`` counts) is *heterogeneous*: its parts are kept, and its vendor is the
   common vendor of the parts, or :data:`MIXED` when they differ.
4. Vendor (:data:`VENDOR_PATTERNS`): named in the text (``NVIDIA``, ``AMD``, ``Intel``
   ...) or recognised from the product (``Instinct``, ``GeForce``, ``Xeon``, ``Arc``).

Every alias that was applied is kept on the result (:attr:`Hardware.aliases`) so that
outputs can show it. A CPU-only result (no accelerator) is the hardware of its host
processors (:func:`hardware_of`), counted in sockets. The key of a name
(:attr:`Hardware.key`) is lower case without spaces or punctuation (``+`` kept), so
memory sizes and form factors stay apart: ``H200-SXM-141GB`` and ``H200-NVL-141GB``
are different hardware, as are ``H200-SXM-141GB`` and its higher-power
``H200-SXM-141GB-CTS``.

Families (:data:`FAMILIES`) name product lines that a filter may ask for as one
(``MI350-series``: MI350X, MI355X, MI350P). Systems renamed between rounds are in
:data:`SYSTEM_ALIASES`, submitters spelled two ways in :data:`SUBMITTER_ALIASES`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Protocol

__all__ = [
    "ACCELERATOR_ALIASES",
    "FAMILIES",
    "MIXED",
    "SUBMITTER_ALIASES",
    "SYSTEM_ALIASES",
    "VENDOR_PATTERNS",
    "Alias",
    "Hardware",
    "Part",
    "accelerator",
    "alias_table",
    "hardware_of",
    "name_key",
    "processor",
    "submitter_key",
    "system_key",
]

#: The vendor of a system whose accelerators come from more than one vendor.
MIXED: Final = "mixed"


@dataclass(frozen=True, slots=True)
class Alias:
    """One published spelling and the name it is read as, with the reason."""

    spelling: str
    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.spelling!r} is read as {self.name!r} ({self.reason})"


#: Accelerator spellings the spelling rules do not join, each read as another name.
ACCELERATOR_ALIASES: Final = (
    Alias("AMD MI300X-NPS1-SPX-192GB-750W", "AMD Instinct MI300X 192GB HBM3",
          "v4.1 Dell spelling of the MI300X; NPS1/SPX is the partition mode, 750 W the "
          "MI300X's only power rating"),
    Alias("AMD Instinct MI300X-NPS1-SPX-192GB-750W", "AMD Instinct MI300X 192GB HBM3",
          "v4.1 spelling of the MI300X (v5.1 on: 'AMD Instinct MI300X 192GB HBM3')"),
    Alias("AMD Instinct MI325X 256GB HBM3E", "AMD Instinct MI325X 256GB HBM3e",
          "HBM3E and HBM3e are one memory"),
    Alias("NVIDIA VR200", "NVIDIA Vera Rubin",
          "Nebius names the Vera Rubin superchip VR200 (VR200-288GB), NVIDIA 'Vera Rubin' "
          "(VR-288GB): one NVL72 rack design with 288 GB per GPU"),
)
#: Product lines a filter may name as one (the key is matched case-insensitively).
FAMILIES: Final = {
    "mi350-series": ("MI350X", "MI355X", "MI350P"),
    "mi300-series": ("MI300X", "MI325X"),
    "blackwell": ("B200", "B300", "GB200", "GB300", "RTX PRO 4500 Blackwell",
                  "RTX PRO 6000 Blackwell"),
    "hopper": ("H100", "H200", "GH200"),
    "rubin": ("Vera Rubin", "VR200"),
}
#: Systems renamed between rounds: (submitter, published system id) -> the id it is read
#: as, with the reason.
SYSTEM_ALIASES: Final = {
    ("Intel", "1-node-2S-GNR-PyTorch"): Alias(
        "1-node-2S-GNR-PyTorch", "1-node-2S-GNR_128C",
        "Intel's 2-socket Xeon 6980P node: v4.1 id, renamed in v5.1"),
}
#: Submitters spelled two ways in the published tables.
SUBMITTER_ALIASES: Final = (
    Alias("ORACLE", "Oracle", "v5.1/v6.0 spell the submitter both ways"),
)
#: (pattern over the cleaned lower-case name, vendor): the first match wins.
VENDOR_PATTERNS: Final = (
    (re.compile(r"\bnvidia\b"), "nvidia"),
    (re.compile(r"\bamd\b"), "amd"),
    (re.compile(r"\bintel\b"), "intel"),
    (re.compile(r"\bgoogle\b|\btpu\b"), "google"),
    (re.compile(r"\bqualcomm\b"), "qualcomm"),
    (re.compile(r"\binstinct\b|\bradeon\b|\bepyc\b|\bryzen\b|\bmi\d{3}"), "amd"),
    (re.compile(r"\bxeon\b|\bgaudi\b|\barc\b"), "intel"),
    (re.compile(r"\bgeforce\b|\bjetson\b|\brtx\b|\bvera\b|\b(?:gb|gh|vr)\d+\b"
                r"|\b[abhl]\d{2,3}\b"), "nvidia"),
)

_MARKS = re.compile(r"\s*(?:\((?:R|TM|C)\)|®|™)\s*", re.I)
_TAG = re.compile(r"^\s*\[[^\]]*\]\s*")
_COUNT = re.compile(r"\(\s*[xX×]\s*(\d+)(?:\s*[xX×]\s*(\d+))?\s*\)")
_JOIN = re.compile(r"\s*\+\s*|\s+and\s+|,\s*(?=[A-Za-z])")
_KEY = re.compile(r"[^a-z0-9+]+")
_NO_ACCELERATOR = frozenset({"", "n/a", "na", "none", "-", "cpu", "null"})


@dataclass(frozen=True, slots=True)
class Part:
    """One kind of accelerator of a system: its name, vendor and stated count."""

    name: str
    vendor: str
    count: int | None = None


@dataclass(frozen=True, slots=True)
class Hardware:
    """The hardware a published name stands for.

    ``published`` is the name as printed; ``name`` the normalised display name (for a
    heterogeneous system its parts joined by ``" + "``); ``key`` compares names
    (:func:`name_key`); ``vendor`` is one vendor, :data:`MIXED`, or ``""`` unknown;
    ``aliases`` the alias entries applied (shown in outputs); ``cpu`` marks host
    processors standing in for a CPU-only system.
    """

    published: str
    name: str
    key: str
    vendor: str
    parts: tuple[Part, ...]
    aliases: tuple[Alias, ...] = ()
    cpu: bool = False

    @property
    def heterogeneous(self) -> bool:
        """More than one kind of accelerator in one system."""
        return len(self.parts) > 1

    @property
    def label(self) -> str:
        """The name for tables: ``(heterogeneous)`` or ``(CPU only)`` added."""
        if self.heterogeneous:
            return f"{self.name} (heterogeneous)"
        if self.cpu:
            return f"{self.name} (CPU only)"
        return self.name

    def matches(self, text: str) -> bool:
        """Whether every part of this hardware is ``text``: a family of :data:`FAMILIES`
        or a piece of the name (compared by key); so a mixed system never matches one
        accelerator's name."""
        family = FAMILIES.get(text.strip().lower())
        needles = [name_key(t) for t in family] if family else [name_key(text)]
        needles = [n for n in needles if n]
        if not needles or not self.parts:
            return False
        return all(any(n in name_key(p.name) for n in needles) for p in self.parts)


class _RowLike(Protocol):
    @property
    def accelerator_model(self) -> str: ...
    @property
    def accelerators_used(self) -> int | None: ...
    @property
    def host_processor(self) -> str: ...
    @property
    def host_processors_per_node(self) -> int | None: ...
    @property
    def nodes(self) -> int | None: ...


def name_key(name: str) -> str:
    """A spelling-insensitive key: lower case, only letters, digits and ``+``."""
    return _KEY.sub("", (name or "").lower())


def _clean(name: str) -> str:
    text = _TAG.sub("", _MARKS.sub(" ", name or ""))
    return re.sub(r"\s+", " ", text).strip()


def _vendor(name: str) -> str:
    low = name.lower()
    for pattern, vendor in VENDOR_PATTERNS:
        if pattern.search(low):
            return vendor
    return ""


_ALIAS_BY_KEY: Final = {name_key(_clean(a.spelling)): a for a in ACCELERATOR_ALIASES}


def _part(text: str, applied: list[Alias]) -> Part:
    count_m = _COUNT.search(text)
    count = None
    if count_m:
        count = int(count_m.group(1)) * (int(count_m.group(2)) if count_m.group(2) else 1)
    name = _clean(_COUNT.sub("", text))
    alias = _ALIAS_BY_KEY.get(name_key(name))
    if alias is not None:
        applied.append(alias)
        name = alias.name
    return Part(name, _vendor(name), count)


@lru_cache(maxsize=4096)
def accelerator(published: str) -> Hardware:
    """The hardware of an accelerator model name as published (module docstring)."""
    raw = published or ""
    cleaned = _clean(raw)
    if cleaned.lower() in _NO_ACCELERATOR:
        return Hardware(raw, "", "", "", ())
    applied = _rule_aliases(raw)
    parts = [_part(p, applied) for p in _JOIN.split(raw) if p.strip()]
    merged: dict[str, Part] = {}
    for p in parts:  # the same model listed twice is one part
        k = name_key(p.name)
        if k in merged:
            old = merged[k]
            both = None if old.count is None or p.count is None else old.count + p.count
            merged[k] = Part(old.name, old.vendor, both)
        else:
            merged[k] = p
    kinds = tuple(merged.values())
    vendors = {p.vendor for p in kinds}
    vendor = kinds[0].vendor if len(vendors) == 1 else MIXED
    name = " + ".join(p.name for p in kinds)
    return Hardware(raw, name, "+".join(name_key(p.name) for p in kinds), vendor, kinds,
                    tuple(dict.fromkeys(applied)))


def _rule_aliases(raw: str) -> list[Alias]:
    """The spelling rules that changed ``raw``, as aliases (to be shown)."""
    out = []
    if _MARKS.search(raw):
        out.append(Alias(raw.strip(), _clean(raw), "trademark marks such as (R) and (TM) "
                         "are not part of the name"))
    elif _TAG.match(raw):
        out.append(Alias(raw.strip(), _clean(raw), "a board maker's tag in brackets is not "
                         "part of the accelerator's name"))
    return out


@lru_cache(maxsize=4096)
def processor(published: str) -> Hardware:
    """The hardware of a host processor name (``INTEL(R) XEON(R) 6980P`` and
    ``Intel(R) Xeon(R) 6980P`` are one), for CPU-only results."""
    name = _clean(published)
    if name.lower() in _NO_ACCELERATOR:
        return Hardware(published or "", "", "", "", (), cpu=True)
    return Hardware(published, name, name_key(name), _vendor(name),
                    (Part(name, _vendor(name)),), tuple(_rule_aliases(published)), cpu=True)


def hardware_of(row: _RowLike) -> tuple[Hardware, int | None]:
    """The hardware of a result and how many of it: its accelerators (``accelerators
    used``), or, for a CPU-only result, its host processors (nodes x sockets)."""
    acc = accelerator(row.accelerator_model)
    if acc.parts:
        return acc, row.accelerators_used or None
    cpu = processor(row.host_processor)
    if not cpu.parts:
        return acc, None
    sockets = row.host_processors_per_node
    return cpu, sockets * (row.nodes or 1) if sockets else None


def submitter_key(name: str) -> str:
    """A submitter's name as compared: :data:`SUBMITTER_ALIASES` applied, case folded."""
    for a in SUBMITTER_ALIASES:
        if name == a.spelling:
            name = a.name
    return name.strip().casefold()


def system_key(submitter: str, system_id: str) -> str:
    """A system id as compared across rounds (:data:`SYSTEM_ALIASES` applied)."""
    alias = SYSTEM_ALIASES.get((submitter, system_id))
    return alias.name if alias is not None else system_id


def alias_table(hardware: Iterable[Hardware] | None = None) -> list[Alias]:
    """The aliases applied to ``hardware`` (in order, once each), or every alias the
    module knows when ``None``."""
    if hardware is None:
        return [*ACCELERATOR_ALIASES, *SYSTEM_ALIASES.values(), *SUBMITTER_ALIASES]
    return list(dict.fromkeys(a for h in hardware for a in h.aliases))
