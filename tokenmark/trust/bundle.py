"""Signed result bundles: Ed25519 keys, ``tokenmark bundle``, ``tokenmark verify``.

Keys (:func:`make_keys`): an Ed25519 key pair made with ``cryptography``; the private key
is PKCS#8 PEM (mode 0600, optionally encrypted with a passphrase from an environment
variable), the public key a small JSON file (``NAME.pub``) with the signer's name and
the key id (first 16 bytes, hex, of the SHA-256 of the raw public key). Keys live in
``$TOKENMARK_KEYS_DIR`` (default ``~/.config/tokenmark/keys``); the public keys a
verifier trusts are the ``*.pub`` files in its ``trusted/`` folder.

A bundle (:func:`make_bundle`) is a gzipped tar, written atomically, holding::

    SHA256SUMS       "<sha256>  run/<path>" for every file, sorted by path
    SIGNATURE.json   signer, key id, public key, time, run hash, signature
    run/...          every file of the results folder (results, records, manifest,
                     MLPerf logs, server metrics, ...)

The signature is over the canonical JSON statement ``{"sha256sums": SHA-256 of
SHA256SUMS, "run_hash": SHA-256 of run/results.json, "signer", "key_id",
"signed_utc"}``, so the name, the time and every file are covered. :func:`verify_bundle`
checks the key is trusted, the signature, the list's hash, then every file, and names the
file that changed, went missing or was added.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import io
import json
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from tokenmark.errors import BadInputError
from tokenmark.inputs import MIB, json_loads, read_bounded
from tokenmark.trust.canonical import canonical_bytes, file_sha256, sha256_hex

__all__ = [
    "BUNDLE_SUFFIX",
    "BundleError",
    "KeyPair",
    "PublicKey",
    "TamperedError",
    "Verified",
    "default_private_key",
    "extract_run",
    "keys_dir",
    "load_private",
    "load_public",
    "make_bundle",
    "make_keys",
    "trust_key",
    "trusted_keys",
    "verify_bundle",
]

BUNDLE_SUFFIX: Final = ".tokenmark.tar.gz"
SUMS: Final = "SHA256SUMS"
SIG: Final = "SIGNATURE.json"
PREFIX: Final = "run/"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
#: Largest bundle member and whole bundle read when verifying (hostile archives).
MAX_MEMBER: Final = 8 << 30
MAX_MEMBERS: Final = 100_000


class BundleError(BadInputError):
    """A bundle or key that cannot be used (unreadable, unknown key, not a bundle)."""


class TamperedError(BundleError):
    """A bundle whose content does not match its signature."""


def keys_dir() -> Path:
    env = os.environ.get("TOKENMARK_KEYS_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tokenmark" / "keys"


def _key_id(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()[:32]


def _raw(pub: Ed25519PublicKey) -> bytes:
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


@dataclass(frozen=True)
class PublicKey:
    name: str
    key_id: str
    raw: bytes
    path: Path | None = None

    def to_json(self) -> dict[str, str]:
        return {"schema": "tokenmark.key/1", "algorithm": "ed25519", "name": self.name,
                "key_id": self.key_id, "public_key": base64.b64encode(self.raw).decode()}


@dataclass(frozen=True)
class KeyPair:
    name: str
    key_id: str
    private_path: Path
    public_path: Path


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    tmp.replace(path)


def _write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def make_keys(name: str, *, directory: Path | None = None, passphrase_env: str = "",
              force: bool = False) -> KeyPair:
    """Make ``NAME.key`` and ``NAME.pub`` in ``directory``; trust the public key there."""
    if not _NAME_RE.match(name):
        raise BundleError(f"cannot use {name!r} as a signer name; use letters, digits and "
                          "._@+- (e.g. alice@example.org)")
    d = directory or keys_dir()
    priv_path, pub_path = d / f"{name}.key", d / f"{name}.pub"
    if priv_path.exists() and not force:
        raise BundleError(f"{priv_path} exists; pass --force to replace it (results it "
                          "signed stay verifiable with the old public key)")
    enc: serialization.KeySerializationEncryption = serialization.NoEncryption()
    if passphrase_env:
        secret = os.environ.get(passphrase_env, "")
        if not secret:
            raise BundleError(f"${passphrase_env} is empty; export the passphrase in it")
        enc = serialization.BestAvailableEncryption(secret.encode())
    key = Ed25519PrivateKey.generate()
    d.mkdir(parents=True, exist_ok=True)
    _write_private(priv_path, key.private_bytes(serialization.Encoding.PEM,
                                                serialization.PrivateFormat.PKCS8, enc))
    pub = PublicKey(name, _key_id(_raw(key.public_key())), _raw(key.public_key()))
    _write_text(pub_path, json.dumps(pub.to_json(), indent=1) + "\n")
    trust_key(pub_path, directory=d)
    return KeyPair(name, pub.key_id, priv_path, pub_path)


def load_public(path: Path) -> PublicKey:
    try:
        doc = json_loads(read_bounded(path, MIB))
        raw = base64.b64decode(doc["public_key"], validate=True)
        Ed25519PublicKey.from_public_bytes(raw)
        name = str(doc["name"])
    except FileNotFoundError:
        raise BundleError(f"no public key at {path}") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise BundleError(f"{path} is not a tokenmark public key ({e}); give a .pub file "
                          "made by 'tokenmark keys'") from None
    kid = _key_id(raw)
    if doc.get("key_id") not in (None, kid):
        raise BundleError(f"{path}: its key id does not match its key; get the file again")
    return PublicKey(name, kid, raw, path)


def trust_key(pub_path: Path, *, directory: Path | None = None) -> PublicKey:
    """Copy a public key into ``trusted/`` (named by its key id)."""
    pub = load_public(pub_path)
    t = (directory or keys_dir()) / "trusted"
    t.mkdir(parents=True, exist_ok=True)
    _write_text(t / f"{pub.name}-{pub.key_id[:12]}.pub", json.dumps(pub.to_json(), indent=1)
                + "\n")
    return pub


def trusted_keys(*, directory: Path | None = None, extra: tuple[Path, ...] = ()
                 ) -> dict[str, PublicKey]:
    """Key id -> public key, from ``trusted/`` and any files given."""
    out: dict[str, PublicKey] = {}
    t = (directory or keys_dir()) / "trusted"
    files = sorted(t.glob("*.pub")) if t.is_dir() else []
    for p in [*files, *extra]:
        k = load_public(p)
        out[k.key_id] = k
    return out


def load_private(path: Path, *, passphrase_env: str = "") -> tuple[str, Ed25519PrivateKey]:
    """The signer name (from the ``.pub`` beside it, else the file stem) and the key."""
    secret = os.environ.get(passphrase_env, "").encode() if passphrase_env else None
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=secret or None)
    except FileNotFoundError:
        raise BundleError(f"no private key at {path}; make one with 'tokenmark keys "
                          "--name NAME'") from None
    except (TypeError, ValueError) as e:
        raise BundleError(f"cannot load the private key {path} ({e}); give the passphrase "
                          "variable with --passphrase-env if it is encrypted") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError(f"{path} is not an Ed25519 key; make one with 'tokenmark keys'")
    pub = path.with_suffix(".pub")
    name = load_public(pub).name if pub.exists() else path.stem
    return name, key


def default_private_key() -> Path:
    d = keys_dir()
    found = sorted(d.glob("*.key")) if d.is_dir() else []
    if len(found) != 1:
        raise BundleError(f"{'no' if not found else len(found)} private keys in {d}; make "
                          "one with 'tokenmark keys --name NAME' or choose with --key")
    return found[0]


# -- bundles ----------------------------------------------------------------------------


def _statement(sums_sha: str, run_hash: str, signer: str, key_id: str, when: str) -> bytes:
    return canonical_bytes({"sha256sums": sums_sha, "run_hash": run_hash, "signer": signer,
                            "key_id": key_id, "signed_utc": when})


def _run_files(run: Path) -> list[Path]:
    if not (run / "results.json").is_file():
        raise BundleError(f"{run} holds no results.json; give a results folder "
                          "'tokenmark run' wrote")
    files = []
    for p in sorted(run.rglob("*")):
        if p.is_symlink():
            raise BundleError(f"{p} is a symbolic link; bundles hold plain files only")
        if p.is_file() and not p.name.endswith(".tmp"):
            files.append(p)
    return files


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def make_bundle(run: Path, key_path: Path, *, output: Path | None = None,
                passphrase_env: str = "") -> tuple[Path, dict[str, Any]]:
    """Pack and sign ``run``; return the bundle's path and its signature document."""
    signer, key = load_private(key_path, passphrase_env=passphrase_env)
    files = _run_files(run)
    entries = [(PREFIX + p.relative_to(run).as_posix(), p) for p in files]
    lines = [f"{file_sha256(p)}  {name}\n" for name, p in entries]
    sums = "".join(sorted(lines, key=lambda s: s.split("  ", 1)[1])).encode("utf-8")
    run_hash = file_sha256(run / "results.json")
    raw = _raw(key.public_key())
    kid = _key_id(raw)
    when = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    sig = key.sign(_statement(sha256_hex(sums), run_hash, signer, kid, when))
    doc = {"schema": "tokenmark.signature/1", "algorithm": "ed25519", "signer": signer,
           "key_id": kid, "public_key": base64.b64encode(raw).decode(), "signed_utc": when,
           "run_hash": run_hash, "sha256sums": sha256_hex(sums),
           "signature": base64.b64encode(sig).decode()}
    out = output or run.parent / f"{run.name}{BUNDLE_SUFFIX}"
    tmp = out.with_name(out.name + ".tmp")
    try:
        with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, SUMS, sums)
            _add_bytes(tar, SIG, json.dumps(doc, indent=1, sort_keys=True).encode() + b"\n")
            for name, p in entries:
                info = tar.gettarinfo(str(p), arcname=name)
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                with open(p, "rb") as f:
                    tar.addfile(info, f)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    return out, doc


@dataclass(frozen=True)
class Verified:
    signer: str
    key_id: str
    signed_utc: str
    run_hash: str
    files: int
    results: dict[str, Any]


def _members(tar: tarfile.TarFile, path: Path) -> dict[str, tarfile.TarInfo]:
    out: dict[str, tarfile.TarInfo] = {}
    for i, m in enumerate(tar):
        if i >= MAX_MEMBERS:
            raise BundleError(f"{path} holds more than {MAX_MEMBERS} files; not a bundle")
        name = m.name
        if not m.isfile():
            if m.isdir():
                continue
            raise TamperedError(f"{path}: {name} is not a plain file (links are never "
                                "bundled); the bundle was altered")
        if name.startswith("/") or ".." in name.split("/") or m.size > MAX_MEMBER:
            raise TamperedError(f"{path}: member {name!r} has an unsafe path or size; the "
                                "bundle was altered")
        if name in out:
            raise TamperedError(f"{path}: {name} appears twice; the bundle was altered")
        out[name] = m
    return out


def _read(tar: tarfile.TarFile, m: tarfile.TarInfo) -> bytes:
    f = tar.extractfile(m)
    assert f is not None
    with f:
        return f.read()


def _digest(tar: tarfile.TarFile, m: tarfile.TarInfo) -> str:
    h = hashlib.sha256()
    f = tar.extractfile(m)
    assert f is not None
    with f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def verify_bundle(path: Path, keys: dict[str, PublicKey]) -> Verified:
    """Check ``path`` against the trusted ``keys``; raise TamperedError naming the file
    that changed, BundleError for an unknown key or an unreadable bundle."""
    try:
        tar = tarfile.open(path, "r:gz")
    except FileNotFoundError:
        raise BundleError(f"no bundle at {path}") from None
    except (OSError, tarfile.TarError) as e:
        raise BundleError(f"{path} is not a tokenmark bundle ({e}); give a "
                          f"{BUNDLE_SUFFIX} file 'tokenmark bundle' wrote") from None
    with tar:
        try:
            members = _members(tar, path)
        except (OSError, tarfile.TarError, EOFError) as e:
            raise TamperedError(f"{path} is damaged ({e}); get the bundle again") from None
        if SUMS not in members or SIG not in members:
            raise BundleError(f"{path} has no {SUMS} or {SIG}; not a tokenmark bundle")
        sums = _read(tar, members[SUMS])
        try:
            doc = json_loads(_read(tar, members[SIG]))
            raw = base64.b64decode(doc["public_key"], validate=True)
            sig = base64.b64decode(doc["signature"], validate=True)
            signer, kid, when = str(doc["signer"]), str(doc["key_id"]), str(doc["signed_utc"])
            run_hash = str(doc["run_hash"])
        except (ValueError, KeyError, TypeError) as e:
            raise TamperedError(f"{path}: {SIG} cannot be read ({e}); the bundle was "
                                "altered") from None
        if _key_id(raw) != kid:
            raise TamperedError(f"{path}: {SIG} names key {kid} but carries another key; "
                                "the bundle was altered")
        trusted = keys.get(kid)
        if trusted is None:
            raise BundleError(f"{path} is signed by an unknown key {kid} (claims signer "
                              f"{signer!r}); if you trust it, add its public key with "
                              "'tokenmark keys --trust FILE.pub'")
        if trusted.raw != raw:
            raise TamperedError(f"{path}: the key does not match the trusted key {kid}")
        try:
            Ed25519PublicKey.from_public_bytes(raw).verify(
                sig, _statement(sha256_hex(sums), run_hash, signer, kid, when))
        except InvalidSignature:
            if sha256_hex(sums) != doc.get("sha256sums"):
                raise TamperedError(f"{path}: {SUMS} changed after signing (the signature "
                                    "does not match)") from None
            raise TamperedError(f"{path}: {SIG} changed after signing (signer, time or "
                                "run hash; the signature does not match)") from None
        listed: dict[str, str] = {}
        for line in sums.decode("utf-8").splitlines():
            digest, _, name = line.partition("  ")
            listed[name] = digest
        problems: list[str] = []
        for name, digest in sorted(listed.items()):
            m = members.get(name)
            if m is None:
                problems.append(f"{name} is missing")
            elif _digest(tar, m) != digest:
                problems.append(f"{name} changed (sha256 differs from the signed list)")
        for name in sorted(set(members) - set(listed) - {SUMS, SIG}):
            problems.append(f"{name} was added after signing")
        if problems:
            also = f" (also: {'; '.join(problems[1:4])})" if len(problems) > 1 else ""
            raise TamperedError(f"{path}: {problems[0]}{also}; the bundle was altered "
                                "after signing")
        if listed.get(PREFIX + "results.json") != run_hash:
            raise TamperedError(f"{path}: the run hash does not match run/results.json")
        try:
            results = json_loads(_read(tar, members[PREFIX + "results.json"]))
        except ValueError as e:  # signed as it is, yet not JSON, or too deep
            raise BundleError(f"{path}: its results.json is not usable ({e})") from None
    return Verified(signer, kid, when, run_hash, len(listed), results)


def extract_run(path: Path, dest: Path) -> Path:
    """Extract the ``run/`` files of a verified bundle into ``dest`` (plain files only)."""
    with tarfile.open(path, "r:gz") as tar:
        members = _members(tar, path)
        for name, m in members.items():
            if not name.startswith(PREFIX):
                continue
            target = dest / name[len(PREFIX):]
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(_read(tar, m))
    return dest
