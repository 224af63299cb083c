"""API keys on both engines: created hashed, verified, listed, revoked."""

from pathlib import Path

import pytest

from app.keys import KeyStore
from lore.errors import InvalidRequestError, NotFoundError
from tests.tables import tables_at


def test_keys_are_verified_listed_and_revoked(store_url: str | None, tmp_path: Path) -> None:
    keys = KeyStore(tables_at(store_url, tmp_path / "keys.sqlite3"))
    secret, record = keys.create(["team-b", "team-a", "team-a"], name="ci")
    admin_secret, admin = keys.create([], admin=True)
    assert record.namespaces == ("team-a", "team-b") and not record.admin
    assert keys.verify(secret) == record
    found = keys.verify(admin_secret)
    assert found is not None and found.admin and found.namespaces == ()
    assert keys.verify(secret[:-1] + ("x" if secret[-1] != "x" else "y")) is None
    assert keys.verify("lk_000000000000_not-a-real-secret-at-all") is None
    assert [k.id for k in keys.list()] == [record.id, admin.id]
    revoked = keys.revoke(record.id)
    assert revoked.revoked is not None and keys.verify(secret) is None
    assert keys.revoke(record.id).revoked == revoked.revoked  # idempotent
    with pytest.raises(NotFoundError):
        keys.revoke("000000000000")
    with pytest.raises(InvalidRequestError):
        keys.create([])
    keys.close()
