"""The PostgreSQL server the tests use: a real one on loopback, a fresh database per test.

``.ci/run`` starts the machine's PostgreSQL (Debian's ``postgresql-15``) when it is down;
``LORE_TEST_POSTGRES_URL`` points at another server (default
``postgresql://postgres@127.0.0.1:5432/postgres``). A test that asks for PostgreSQL and
finds no server fails: it is never skipped.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

ADMIN_URL = os.environ.get(
    "LORE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def _with_database(url: str, name: str) -> str:
    base, _, _query = url.partition("?")
    root = base.rsplit("/", 1)[0]
    return f"{root}/{name}"


@contextmanager
def fresh_database() -> Iterator[str]:
    """A new empty database on the test server; dropped (connections and all) afterwards."""
    import psycopg

    name = f"lore_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield _with_database(ADMIN_URL, name)
    finally:
        from lore.db import close_all_postgres

        close_all_postgres()
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
