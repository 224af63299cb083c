"""API keys: stored hashed, each scoped to namespaces, revocable.

A key reads ``lk_<id>_<secret>``; only the SHA-256 of the whole key is stored (the
secret is 256 random bits, so a slow password hash would add nothing), compared in
constant time. The id part lets ``lore keys revoke`` name a key without its secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lore.db import Database, Tables
from lore.errors import InvalidRequestError, NotFoundError

NAMESPACE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_KEY = re.compile(r"^lk_([0-9a-f]{12})_([A-Za-z0-9_-]{20,})$")


@dataclass(frozen=True, slots=True)
class ApiKey:
    """What a key may do (never its secret)."""

    id: str
    name: str
    namespaces: tuple[str, ...]
    admin: bool
    created: float
    revoked: float | None = None


def check_namespace(name: str) -> str:
    """The name, if it is a valid namespace; else a clear error."""
    if not NAMESPACE.fullmatch(name):
        raise InvalidRequestError(
            f"invalid namespace {name!r}: use 1-63 of a-z, 0-9, '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore(Tables):
    """The key table (``keys.sqlite3`` in the data directory, or a PostgreSQL schema)."""

    COMPONENT = "keys"

    def __init__(self, where: Path | Database) -> None:
        super().__init__(
            where,
            "CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, digest TEXT NOT NULL, "
            "name TEXT NOT NULL, namespaces TEXT NOT NULL, admin INTEGER NOT NULL, "
            "created REAL NOT NULL, revoked REAL)",
        )

    def create(
        self, namespaces: Sequence[str], *, admin: bool = False, name: str = ""
    ) -> tuple[str, ApiKey]:
        """A new key: (the secret, shown once; its record)."""
        spaces = tuple(sorted({check_namespace(n) for n in namespaces}))
        if not spaces and not admin:
            raise InvalidRequestError("a key needs at least one namespace (or --admin)")
        key_id = secrets.token_hex(6)
        key = f"lk_{key_id}_{secrets.token_urlsafe(32)}"
        record = ApiKey(key_id, name, spaces, admin, time.time())
        with self._transaction() as db:
            db.execute(
                "INSERT INTO api_keys(id, digest, name, namespaces, admin, created) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key_id, _digest(key), name, json.dumps(spaces), int(admin), record.created),
            )
        return key, record

    def verify(self, key: str) -> ApiKey | None:
        """The key's record if it is known and not revoked."""
        match = _KEY.fullmatch(key.strip())
        if match is None:
            return None
        with self._read() as db:
            row = db.execute(
                "SELECT id, name, namespaces, admin, created, revoked, digest FROM api_keys "
                "WHERE id = ?",
                (match.group(1),),
            ).fetchone()
        if row is None or row[5] is not None or not hmac.compare_digest(row[6], _digest(key)):
            return None
        return _record(row)

    def list(self) -> list[ApiKey]:
        """Every key, oldest first."""
        with self._read() as db:
            rows = db.execute(
                "SELECT id, name, namespaces, admin, created, revoked FROM api_keys "
                "ORDER BY created, id"
            ).fetchall()
        return [_record(r) for r in rows]

    def revoke(self, key_id: str) -> ApiKey:
        """Revoke a key by id (idempotent); unknown id → NotFoundError."""
        with self._transaction() as db:
            changed = db.execute(
                "UPDATE api_keys SET revoked = COALESCE(revoked, ?) WHERE id = ?",
                (time.time(), key_id),
            ).rowcount
        if not changed:
            raise NotFoundError(f"no API key with id {key_id!r}")
        return next(k for k in self.list() if k.id == key_id)


def _record(row: Sequence[object]) -> ApiKey:
    return ApiKey(
        id=str(row[0]),
        name=str(row[1]),
        namespaces=tuple(json.loads(str(row[2]))),
        admin=bool(row[3]),
        created=float(str(row[4])),
        revoked=None if row[5] is None else float(str(row[5])),
    )
