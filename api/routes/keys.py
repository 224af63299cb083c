"""``/v1/keys``: API key management over HTTP (admin keys only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, Field

from api.deps import AdminDep
from app.keys import ApiKey, KeyStore

router = APIRouter(prefix="/v1/keys", tags=["keys"])


class KeyRequest(BaseModel):
    """A key to create."""

    namespaces: list[str] = Field(default_factory=list, max_length=100)
    admin: bool = False
    name: str = Field("", max_length=200)


class KeyOut(BaseModel):
    """A key's record (never its secret, except once, on creation)."""

    id: str
    name: str
    namespaces: list[str]
    admin: bool
    created: float
    revoked: float | None = None
    key: str | None = Field(None, description="the secret: returned once, when created")


def _out(record: ApiKey, secret: str | None = None) -> KeyOut:
    return KeyOut(
        id=record.id,
        name=record.name,
        namespaces=list(record.namespaces),
        admin=record.admin,
        created=record.created,
        revoked=record.revoked,
        key=secret,
    )


def _store(request: Request) -> KeyStore:
    store: KeyStore = request.app.state.keys
    return store


@router.post("", response_model=KeyOut, status_code=201)
async def create_key(body: KeyRequest, request: Request, _: AdminDep) -> KeyOut:
    """Create a key scoped to namespaces."""
    secret, record = _store(request).create(body.namespaces, admin=body.admin, name=body.name)
    return _out(record, secret)


@router.get("", response_model=list[KeyOut])
async def list_keys(request: Request, _: AdminDep) -> list[KeyOut]:
    """Every key."""
    return [_out(k) for k in _store(request).list()]


@router.delete("/{key_id}", response_model=KeyOut)
async def revoke_key(
    key_id: Annotated[str, Path(pattern=r"^[0-9a-f]{12}$")], request: Request, _: AdminDep
) -> KeyOut:
    """Revoke a key (idempotent)."""
    return _out(_store(request).revoke(key_id))
