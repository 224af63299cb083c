"""FastAPI dependencies: who is calling, and the runtime of the namespace they may use.

They are ``async``: each is a dictionary lookup or one indexed SQLite read, cheaper than
the thread hop FastAPI makes for a plain function on every request.

With auth off (the local default) every request is the local admin in the default
namespace. With auth on, ``Authorization: Bearer <key>`` names an API key whose
namespaces bound every read and write; a namespace the key does not hold answers 404,
exactly like one that does not exist, so keys cannot probe for other tenants.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from app.keys import KeyStore, check_namespace
from app.namespaces import Namespaces
from app.runtime import Runtime
from lore.errors import ForbiddenError, InvalidRequestError, NotFoundError, UnauthorizedError
from lore.settings import Settings

bearer = HTTPBearer(auto_error=False, description="an API key from `lore keys create`")


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller: the key's id (None with auth off), namespaces and admin right."""

    key_id: str | None
    namespaces: tuple[str, ...]
    admin: bool

    def namespace(self, requested: str | None) -> str:
        """The one namespace a request works in."""
        if requested is None:
            if len(self.namespaces) == 1:
                return self.namespaces[0]
            raise InvalidRequestError(
                f"this key holds namespaces {list(self.namespaces)}: choose one with ?namespace="
            )
        check_namespace(requested)
        if requested not in self.namespaces and not (self.admin and self.key_id is not None):
            raise NotFoundError(f"no namespace {requested!r}")
        return requested

    def held(self, namespace: str) -> bool:
        """Whether the key names this namespace (an admin key reaches others too)."""
        return namespace in self.namespaces

    def readable(self, requested: list[str] | None) -> list[str]:
        """Namespaces a search covers: the requested ones, else every one the key holds."""
        if not requested:
            if not self.namespaces:
                raise InvalidRequestError("this key holds no namespace: pass ?namespace=")
            return list(self.namespaces)
        return sorted({self.namespace(n) for n in requested})


async def get_settings(request: Request) -> Settings:
    """The process's settings."""
    settings: Settings = request.app.state.settings
    return settings


async def get_namespaces(request: Request) -> Namespaces:
    """The runtimes by namespace (built in the lifespan)."""
    namespaces: Namespaces = request.app.state.namespaces
    return namespaces


async def get_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> Principal:
    """Authenticate the request (or the local admin when auth is off)."""
    settings: Settings = request.app.state.settings
    if not settings.auth.enabled:
        return Principal(None, (settings.auth.default_namespace,), admin=True)
    if credentials is None:
        raise UnauthorizedError("missing `Authorization: Bearer <key>` header")
    keys: KeyStore = request.app.state.keys
    key = keys.verify(credentials.credentials)
    if key is None:
        raise UnauthorizedError("unknown or revoked API key")
    return Principal(key.id, key.namespaces, key.admin)


PrincipalDep = Annotated[Principal, Depends(get_principal)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
NamespacesDep = Annotated[Namespaces, Depends(get_namespaces)]
NamespaceQuery = Annotated[
    str | None,
    Query(description="the namespace to use; optional when the key holds exactly one"),
]


async def require_admin(principal: PrincipalDep) -> Principal:
    """Only admin keys pass."""
    if not principal.admin:
        raise ForbiddenError("this route needs an admin key")
    return principal


def existing_runtime(principal: Principal, namespaces: Namespaces, namespace: str) -> Runtime:
    """The runtime of a namespace: one an admin key does not hold must exist already.

    Only an ingest creates a namespace: a read (or an admin's probe) of a name that has
    no store answers 404 and leaves no directory and no runtime behind. A key's own
    namespaces read as empty until their first write.
    """
    if not principal.held(namespace) and not namespaces.exists(namespace):
        raise NotFoundError(f"no namespace {namespace!r}")
    return namespaces.runtime(namespace)


async def get_runtime(
    principal: PrincipalDep, namespaces: NamespacesDep, namespace: NamespaceQuery = None
) -> Runtime:
    """The runtime of the namespace this request works in (never created here)."""
    return existing_runtime(principal, namespaces, principal.namespace(namespace))


async def get_ingest_runtime(
    principal: PrincipalDep, namespaces: NamespacesDep, namespace: NamespaceQuery = None
) -> Runtime:
    """The runtime documents are written to (the namespace is created on first write)."""
    return namespaces.runtime(principal.namespace(namespace))


async def require_metrics_reader(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """``/metrics`` lists every namespace: open with auth off, else an admin or the token."""
    settings: Settings = request.app.state.settings
    if not settings.auth.enabled:
        return
    token = settings.auth.metrics_token
    given = credentials.credentials if credentials is not None else ""
    if token is not None and hmac.compare_digest(given.encode(), token.get_secret_value().encode()):
        return
    principal = await get_principal(request, credentials)
    if not principal.admin:
        raise ForbiddenError("/metrics needs an admin key or LORE_AUTH__METRICS_TOKEN")


AdminDep = Annotated[Principal, Depends(require_admin)]
MetricsReaderDep = Annotated[None, Depends(require_metrics_reader)]
RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
IngestRuntimeDep = Annotated[Runtime, Depends(get_ingest_runtime)]
