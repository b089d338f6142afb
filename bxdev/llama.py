"""Run the real llama-server (built by `llama_build`) on a free loopback port.

`open_llama_server()` starts it with SPEC section 11's flags for tests (`-c 4096 -np 1
--no-webui --no-warmup -t 2 --host 127.0.0.1 --port <free>`), optionally a chat template from
the same source package and more flags, waits until `/health` answers 200, and stops it
cleanly afterwards. Its output goes to a log file that a failing test can print.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import attrs
import httpx
import trio

from . import llama_build

__all__ = ["LlamaServer", "LlamaServerError", "free_port", "open_llama_server", "server_args"]

READY_TIMEOUT_S = 300.0
STOP_GRACE_S = 10.0


class LlamaServerError(Exception):
    """The real server is not built, or did not start; the message says what to do."""


@attrs.frozen
class LlamaServer:
    url: str
    port: int
    log_path: Path
    process: trio.Process

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def server_args(
    port: int,
    *,
    template: str | None = None,
    ctx: int = 4096,
    threads: int = 2,
    extra: Sequence[str] = (),
    model: Path | None = None,
) -> list[str]:
    """The command line: SPEC section 11's test flags, a template file, then `extra`; the
    small model unless `model` names another GGUF file."""
    built = llama_build.is_built() if model is None else llama_build.server_binary().is_file()
    if not built:
        raise LlamaServerError(
            f"llama-server is not built in {llama_build.cache_root()}; run `make llama-server`"
        )
    args = [
        str(llama_build.server_binary()),
        "-m", str(llama_build.model_path() if model is None else model),
        "-c", str(ctx),
        "-np", "1",
        "--no-webui",
        "--no-warmup",
        "-t", str(threads),
        "--host", "127.0.0.1",
        "--port", str(port),
    ]  # fmt: skip
    if template is not None:
        path = llama_build.templates_dir() / template
        if not path.is_file():
            raise LlamaServerError(f"no template {template} in {llama_build.templates_dir()}")
        args += ["--chat-template-file", str(path)]
    return args + list(extra)


@contextlib.asynccontextmanager
async def open_llama_server(
    log_dir: Path,
    *,
    template: str | None = None,
    ctx: int = 4096,
    extra: Sequence[str] = (),
    port: int | None = None,
    ready: bool = True,
) -> AsyncIterator[LlamaServer]:
    """Start llama-server; yield once `/health` answers 200 (unless `ready` is False).

    Raises:
        LlamaServerError: not built, or it exited or did not become ready in time (the
            message holds the end of its log).
    """
    port = port or free_port()
    args = server_args(port, template=template, ctx=ctx, extra=extra)
    log_path = _log_file(log_dir, port)
    with log_path.open("wb") as log:
        process = await trio.lowlevel.open_process(args, stdout=log, stderr=subprocess.STDOUT)
        server = LlamaServer(f"http://127.0.0.1:{port}", port, log_path, process)
        try:
            if ready:
                await wait_ready(server)
            yield server
        finally:
            with trio.CancelScope(shield=True):
                await _stop(process)


def _log_file(log_dir: Path, port: int) -> Path:
    log_dir.mkdir(parents=True, exist_ok=True)
    return log_dir / f"llama-server-{port}.log"


async def wait_ready(server: LlamaServer, timeout: float = READY_TIMEOUT_S) -> None:
    """Poll `/health` until it answers 200 (503 while the model loads)."""
    async with httpx.AsyncClient(base_url=server.url, timeout=5.0) as client:
        with trio.move_on_after(timeout):
            while server.process.poll() is None:
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get("/health")).status_code == 200:
                        return
                await trio.sleep(0.1)  # a real process: nothing to wait on but its answer
    state = "exited" if server.process.poll() is not None else "did not become ready"
    raise LlamaServerError(f"llama-server {state}; its log ends:\n{server.log_tail()}")


async def _stop(process: trio.Process) -> None:
    if process.poll() is None:
        process.terminate()
        with trio.move_on_after(STOP_GRACE_S):
            await process.wait()
    if process.poll() is None:
        process.kill()
        await process.wait()
