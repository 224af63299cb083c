"""``lore keys …``: create, list and revoke API keys (stored hashed in the data directory)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from api.cli_common import out
from api.cli_group import CliError

if TYPE_CHECKING:
    from app.keys import ApiKey, KeyStore


@contextmanager
def _keys(ctx: click.Context) -> Iterator[KeyStore]:
    from app.builders import database_for
    from app.keys import KeyStore
    from lore.errors import LoreError

    settings = ctx.obj["root_settings"]
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    store = KeyStore(database_for(settings, "keys"))
    try:
        yield store
    except LoreError as exc:
        raise CliError.of(exc) from exc
    finally:
        store.close()


def iso(stamp: float | None) -> str | None:
    """A Unix time as ISO 8601 in UTC (``2026-12-02T12:50:07Z``); None stays None."""
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _public(key: ApiKey) -> dict[str, object]:
    data = asdict(key)
    data["namespaces"] = list(key.namespaces)
    data["created"] = iso(key.created)
    data["revoked"] = iso(key.revoked)
    return data


@click.group()
def keys() -> None:
    """API keys for `lore serve --auth`: each key sees only its namespaces."""


@keys.command()
@click.option("--namespace", "namespaces", multiple=True, help="A namespace (repeatable).")
@click.option("--admin", is_flag=True, help="May manage keys and reach any namespace.")
@click.option("--name", default="", help="A label for the key.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def create(
    ctx: click.Context, namespaces: tuple[str, ...], admin: bool, name: str, as_json: bool
) -> None:
    """Create a key; its secret is shown once."""
    with _keys(ctx) as store:
        secret, record = store.create(namespaces, admin=admin, name=name)
    if as_json:
        click.echo(json.dumps({"key": secret, **_public(record)}, indent=2))
        return
    out.print(f"key {record.id} for {', '.join(record.namespaces) or '(admin only)'}:")
    out.print(secret, highlight=False)
    out.print("store it now: only its hash is kept")


@keys.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_keys(ctx: click.Context, as_json: bool) -> None:
    """List keys (never their secrets)."""
    with _keys(ctx) as store:
        found = store.list()
    if as_json:
        click.echo(json.dumps([_public(k) for k in found], indent=2))
        return
    for k in found:
        state = "revoked" if k.revoked else "active"
        role = " admin" if k.admin else ""
        out.print(f"{k.id}  {state}{role}  {','.join(k.namespaces)}  {k.name}", highlight=False)


@keys.command()
@click.argument("key_id")
@click.option("--json", "as_json", is_flag=True, help='Print {"revoked": KEY_ID} as JSON.')
@click.pass_context
def revoke(ctx: click.Context, key_id: str, as_json: bool) -> None:
    """Revoke a key by its id."""
    with _keys(ctx) as store:
        store.revoke(key_id)
    if as_json:
        click.echo(json.dumps({"revoked": key_id}))
    else:
        out.print(f"revoked {key_id}")
