"""A logging TCP proxy in front of an LLM server: what the client really sent, and when.

The client's own counters say what it meant to do; this says what reached the server:
when each HTTP request started, when its response began, and whether the client hung
up first (an *abandoned* call: the client timed out or was cancelled while the request
was queued or computing). From the events it derives the calls in flight over time::

    python -m bench.llm_proxy --upstream 127.0.0.1:8080 --port 9090 --log trace.jsonl

or in-process with :class:`TraceProxy` (``bench/llm_real.py`` does). It only reads the
first line of each request and response (method, path, status); bodies pass untouched.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_METHODS = (b"GET ", b"POST ", b"PUT ", b"DELETE ", b"HEAD ", b"OPTIONS ", b"PATCH ")


@dataclass
class Call:
    """One HTTP request through the proxy."""

    connection: int
    line: str
    sent: float
    answered: float | None = None
    status: int | None = None
    finished: float | None = None
    abandoned: float | None = None  # the client closed before the response began

    def as_dict(self, origin: float) -> dict[str, Any]:
        """Times relative to ``origin`` (seconds, 0.01 s)."""
        out: dict[str, Any] = {"connection": self.connection, "line": self.line}
        for name in ("sent", "answered", "finished", "abandoned"):
            value = getattr(self, name)
            out[name] = None if value is None else round(value - origin, 2)
        out["status"] = self.status
        return out


@dataclass
class Trace:
    """Every call seen, in the order they were sent."""

    origin: float = field(default_factory=time.monotonic)
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def summary(self, path: str = "/chat/completions") -> dict[str, Any]:
        """Counts for the calls whose request line contains ``path``."""
        with self.lock:
            calls = [c for c in self.calls if path in c.line]
        events = sorted(
            [(c.sent, 1) for c in calls]
            + [(end, -1) for c in calls if (end := c.finished or c.abandoned) is not None]
        )
        in_flight = peak = 0
        for _, step in events:
            in_flight += step
            peak = max(peak, in_flight)
        statuses: dict[str, int] = {}
        for c in calls:
            key = "abandoned" if c.status is None else str(c.status)
            statuses[key] = statuses.get(key, 0) + 1
        waits = [c.answered - c.sent for c in calls if c.answered is not None]
        return {
            "requests": len(calls),
            "statuses": statuses,
            "abandoned": sum(c.abandoned is not None and c.status is None for c in calls),
            "peak_in_flight": peak,
            "longest_answer_s": round(max(waits), 1) if waits else None,
        }

    def events(self) -> list[dict[str, Any]]:
        """Each call as a dict (times from the proxy's start)."""
        with self.lock:
            return [c.as_dict(self.origin) for c in self.calls]


class TraceProxy:
    """Forward ``127.0.0.1:port`` to ``upstream``, recording calls into :attr:`trace`."""

    def __init__(self, upstream_host: str, upstream_port: int, log: Path | None = None) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.trace = Trace()
        self.log = log
        self.port = 0
        self._ids = itertools.count(1)

    async def _pipe_up(self, cid: int, reader: asyncio.StreamReader, writer: Any) -> None:
        """Client → server; every chunk starting with a method opens a call."""
        while data := await reader.read(65536):
            if data.startswith(_METHODS):
                line = data.split(b"\r\n", 1)[0].decode("latin-1")
                with self.trace.lock:
                    self.trace.calls.append(Call(cid, line, time.monotonic()))
                self._write_log(cid, "sent", line)
            writer.write(data)
            await writer.drain()

    async def _pipe_down(self, cid: int, reader: asyncio.StreamReader, writer: Any) -> None:
        """Server → client; a status line answers the oldest open call of the connection."""
        while data := await reader.read(65536):
            if data.startswith(b"HTTP/"):
                status = int(data.split(b" ", 2)[1])
                now = time.monotonic()
                with self.trace.lock:
                    for call in self.trace.calls:
                        if call.connection == cid and call.answered is None:
                            call.answered, call.status, call.finished = now, status, now
                            break
                self._write_log(cid, "answered", str(status))
            writer.write(data)
            await writer.drain()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: Any) -> None:
        cid = next(self._ids)
        try:
            server_r, server_w = await asyncio.open_connection(*self.upstream)
        except OSError:
            client_w.close()
            return
        up = asyncio.create_task(self._pipe_up(cid, client_r, server_w))
        down = asyncio.create_task(self._pipe_down(cid, server_r, client_w))
        done, pending = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        now = time.monotonic()
        if up in done:  # the client hung up (or sent EOF) first
            with self.trace.lock:
                for call in self.trace.calls:
                    if call.connection == cid and call.answered is None:
                        call.abandoned = now
            self._write_log(cid, "client closed", "")
        for task in pending:
            task.cancel()
        for w in (server_w, client_w):
            w.close()

    def _write_log(self, cid: int, what: str, detail: str) -> None:
        if self.log is None:
            return
        t = round(time.monotonic() - self.trace.origin, 2)
        record: dict[str, object] = {"t": t, "conn": cid, "event": what, "detail": detail}
        with self.log.open("a") as out:
            out.write(json.dumps(record) + "\n")

    async def serve(self, port: int = 0, ready: threading.Event | None = None) -> None:
        """Listen until cancelled."""
        server = await asyncio.start_server(self._handle, "127.0.0.1", port)
        self.port = int(server.sockets[0].getsockname()[1])
        if ready is not None:
            ready.set()
        else:
            print(f"proxy on http://127.0.0.1:{self.port} -> {self.upstream}", flush=True)
        async with server:
            await server.serve_forever()


@contextmanager
def proxied(url: str, log: Path | None = None) -> Iterator[tuple[str, TraceProxy]]:
    """A proxy for the server at ``url`` (``http://host:port/v1``) in a background thread.

    Yields the URL to use instead (same path) and the proxy, whose ``trace`` fills as
    calls go through.
    """
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    host, _, port = hostport.partition(":")
    proxy = TraceProxy(host, int(port or 80), log)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    task: list[asyncio.Task[None]] = []

    def main() -> None:
        task.append(loop.create_task(proxy.serve(0, ready)))
        with suppress(asyncio.CancelledError):
            loop.run_until_complete(task[0])

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield f"http://127.0.0.1:{proxy.port}/{path}", proxy
    finally:
        loop.call_soon_threadsafe(task[0].cancel)
        thread.join(10)
        loop.close()


def main() -> None:
    """Command line: proxy until Ctrl-C, events as JSON lines in ``--log``."""
    parser = argparse.ArgumentParser(prog="python -m bench.llm_proxy", description=__doc__)
    parser.add_argument("--upstream", required=True, help="host:port of the LLM server")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path, default=Path("llm-trace.jsonl"))
    args = parser.parse_args()
    host, _, port = args.upstream.partition(":")
    proxy = TraceProxy(host, int(port), args.log)
    try:
        asyncio.run(proxy.serve(args.port))
    except KeyboardInterrupt:
        print(json.dumps(proxy.trace.summary(), indent=2))


if __name__ == "__main__":
    main()
