"""Signed bundles: keys, bundle, verify; a tampered file is named; an unknown key is a
clear error; the results database and the web UI show who signed."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest

from tokenmark.api import results as results_api
from tokenmark.trust import bundle as b

RUN = ("run", "-b", "llama3.1-8b", "-s", "poisson", "--qps", "100", "--min-duration", "0.5",
       "--dataset-size", "32", "--sut", "latency-model", "--virtual-time", "-q")


@pytest.fixture
def signed(cli, tmp_path) -> tuple[Path, Path]:
    code, out = cli(*RUN, "-o", tmp_path / "run")  # stored in $TOKENMARK_DB
    assert code == 0, out
    code, out = cli("keys", "--name", "alice@example.org")
    assert code == 0 and "key id" in out, out
    code, out = cli("bundle", tmp_path / "run")
    assert code == 0, out
    path = tmp_path / f"run{b.BUNDLE_SUFFIX}"
    assert path.is_file() and "signed by alice@example.org" in out
    return tmp_path / "run", path


def rewrite(src: Path, dst: Path, change) -> None:
    """Copy a bundle, passing each member's bytes through ``change(name, data)``."""
    with tarfile.open(src, "r:gz") as tin, tarfile.open(dst, "w:gz") as tout:
        for m in tin:
            data = tin.extractfile(m).read()  # type: ignore[union-attr]
            data = change(m.name, data)
            if data is None:
                continue
            m.size = len(data)
            tout.addfile(m, io.BytesIO(data))


def test_bundle_holds_every_file_and_verifies(cli, signed):
    run, path = signed
    with tarfile.open(path) as t:
        names = set(t.getnames())
    for f in ("results.json", "records.jsonl", "manifest.json"):
        assert f"run/{f}" in names
    assert {"SHA256SUMS", "SIGNATURE.json"} <= names
    code, out = cli("verify", path)
    assert code == 0 and "VERIFIED: signed by alice@example.org" in out, out


def test_tampered_file_is_named(cli, signed, tmp_path):
    _, path = signed
    bad = tmp_path / "bad.tar.gz"

    def edit(name, data):
        return data.replace(b'"output_tokens":', b'"output_tokens": ', 1) \
            if name == "run/records.jsonl" else data

    rewrite(path, bad, edit)
    code, out = cli("verify", bad)
    assert code == 1
    assert "REJECTED" in out and "run/records.jsonl changed" in out

    rewrite(path, bad, lambda n, d: None if n == "run/manifest.json" else d)
    code, out = cli("verify", bad)
    assert code == 1 and "run/manifest.json is missing" in out

    def resign(name, data):  # claim another signer: the signature no longer matches
        if name == "SIGNATURE.json":
            doc = json.loads(data)
            doc["signer"] = "mallory"
            return json.dumps(doc).encode()
        return data

    rewrite(path, bad, resign)
    code, out = cli("verify", bad)
    assert code == 1 and "SIGNATURE.json changed after signing" in out


def test_unknown_key_is_a_clear_error(cli, signed, tmp_path, isolated):
    _, path = signed
    code, out = cli("verify", path, "--keys-dir", tmp_path / "empty")
    assert code == 2
    assert "signed by an unknown key" in out and "alice@example.org" in out
    assert "tokenmark keys --trust" in out
    # trusting the public key (as a verifier would) makes it verify
    code, out = cli("verify", path, "--keys-dir", tmp_path / "empty", "--key",
                    isolated / "keys" / "alice@example.org.pub")
    assert code == 0, out


def test_results_db_and_web_ui_show_the_signer(cli, signed, tmp_path):
    run, path = signed
    run_hash = b.file_sha256(run / "results.json")
    [sig] = results_api.signers([run_hash])[run_hash]
    assert sig.signer == "alice@example.org" and sig.verified

    from fastapi.testclient import TestClient

    from tokenmark.webui import UiConfig, create_app

    with TestClient(create_app(UiConfig()), base_url="http://127.0.0.1") as client:
        page = client.get(f"/runs/{run_hash}").text
        assert "signed by <strong>alice@example.org</strong>" in page
        listing = client.get("/runs").text
        assert "alice@example.org" in listing


def test_verify_store_imports_with_the_signer(cli, signed, tmp_path):
    _, path = signed
    db = tmp_path / "other.db"
    code, out = cli("verify", path, "--store", "--db", db)
    assert code == 0 and "stored" in out, out
    runs = results_api.list_runs(db=db)
    assert len(runs) == 1
    assert results_api.signers([runs[0].run_hash], db=db)[runs[0].run_hash][0].verified


def test_bad_inputs(cli, tmp_path):
    code, out = cli("bundle", tmp_path)
    assert code == 2 and "holds no results.json" in out or "private keys" in out
    code, out = cli("verify", tmp_path / "none.tar.gz")
    assert code == 2 and "no bundle at" in out
    (tmp_path / "junk.tar.gz").write_bytes(b"not a tar")
    code, out = cli("verify", tmp_path / "junk.tar.gz")
    assert code == 2 and "not a tokenmark bundle" in out
    code, out = cli("keys", "--name", "no spaces please")
    assert code == 2 and "signer name" in out
