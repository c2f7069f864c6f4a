"""Who signed which run: the ``signatures`` table (written by ``tokenmark bundle`` and
``tokenmark verify --store``, read by ``tokenmark results`` and the web UI)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from tokenmark.store import Store
from tokenmark.store import engine as _engine
from tokenmark.store.schema import signatures
from tokenmark.store.writer import _insert

__all__ = ["Signature", "add_signature", "signatures_of"]


@dataclass(frozen=True, slots=True)
class Signature:
    run_hash: str
    key_id: str
    signer: str
    signed_utc: str
    verified: bool
    bundle_sha256: str


def add_signature(store: Store, sig: Signature) -> bool:
    """Record ``sig`` (idempotent per run and key; a verified one upgrades an unverified
    one). Returns whether a row was added or changed."""

    def tx() -> bool:
        with store.engine.connect() as conn:
            conn.execution_options(tokenmark_write=True)
            with conn.begin():
                ins = _insert(conn, signatures).values(
                    run_hash=sig.run_hash, key_id=sig.key_id, signer=sig.signer,
                    signed_utc=sig.signed_utc, verified=sig.verified,
                    bundle_sha256=sig.bundle_sha256)
                stmt = ins.on_conflict_do_update(
                    index_elements=[signatures.c.run_hash, signatures.c.key_id],
                    set_={"signer": ins.excluded.signer, "signed_utc": ins.excluded.signed_utc,
                          "verified": ins.excluded.verified,
                          "bundle_sha256": ins.excluded.bundle_sha256},
                    where=sa.or_(signatures.c.verified.is_(False),
                                 signatures.c.bundle_sha256 != ins.excluded.bundle_sha256),
                )
                return bool(conn.execute(stmt).rowcount)

    return _engine.retrying(tx)


def signatures_of(store: Store, run_hashes: Iterable[str] | None = None
                  ) -> dict[str, list[Signature]]:
    """Run hash -> its signatures (verified first); ``None``: every run."""
    stmt = sa.select(signatures).order_by(signatures.c.run_hash, signatures.c.verified.desc(),
                                          signatures.c.signed_utc)
    hashes = None if run_hashes is None else list(dict.fromkeys(run_hashes))
    out: dict[str, list[Signature]] = {}
    with store.engine.connect() as conn:
        chunks = [None] if hashes is None else [hashes[i:i + 500]
                                                for i in range(0, len(hashes), 500)]
        for chunk in chunks:
            q = stmt if chunk is None else stmt.where(signatures.c.run_hash.in_(chunk))
            for m in conn.execute(q).mappings():
                out.setdefault(m["run_hash"], []).append(Signature(
                    m["run_hash"], m["key_id"], m["signer"], m["signed_utc"],
                    bool(m["verified"]), m["bundle_sha256"]))
    return out
