"""`python -m boxmaker.testing`: the fake llama-server on a TCP port, for end-to-end tests
and benchmarks of `loopd serve` and `bxctl` as processes.

SIGUSR1 makes slot 0 busy with another client's task (requests wait, `/slots` says so) and
SIGUSR2 frees it, as `FakeLlamaServer.hold` and `release` do in process: a test of processes
holds a turn at the server for as long as it needs, without timing.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
from pathlib import Path
from typing import Any

import trio

from ..proto import parse_json
from .fake_server import FakeLlamaServer, Fault, FaultKind, Reply, Timing
from .recording import load_recording

__all__ = ["load_script", "main"]


def load_script(raw: dict[str, Any]) -> tuple[list[Reply | Fault], Reply | None]:
    """A script from JSON: `{"replies": [...], "default": {...}}`.

    A reply is `{"content", "reasoning", "tool_calls": [[name, arguments], ...]}`; a fault is
    `{"fault": "cut", "after": 3}` (`"phase"` too, for a stall).
    """

    def reply(entry: dict[str, Any]) -> Reply:
        calls = tuple((str(name), str(args)) for name, args in entry.get("tool_calls", []))
        return Reply(
            entry.get("content"), entry.get("reasoning"), calls, entry.get("finish_reason")
        )

    def item(entry: dict[str, Any]) -> Reply | Fault:
        if "fault" in entry:
            kind = FaultKind(entry["fault"])
            return Fault(kind, entry.get("after", 3), entry.get("phase", "idle"))
        return reply(entry)

    default = raw.get("default")
    return [item(entry) for entry in raw.get("replies", [])], reply(default) if default else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m boxmaker.testing",
        description="A fake llama-server on a TCP port, scripted or replaying a recording.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--port-file", type=Path, help="write the port here once listening")
    parser.add_argument("--script", type=Path, help='JSON: {"replies": [...], "default": {...}}')
    parser.add_argument("--replay", type=Path, help="a .http recording to answer from")
    parser.add_argument("--reply", help="answer every chat request with this content")
    parser.add_argument("--api-key", help="answer 401 to requests without this key")
    parser.add_argument("--n-slots", type=int, default=1)
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--ms-per-token", type=float, default=0.0)
    parser.add_argument("--prompt-ms-per-token", type=float, default=0.0)
    parser.add_argument(
        "--kind",
        choices=["llama-server", "openai"],
        default="llama-server",
        help="answer as llama-server does, or as an OpenAI-style server (vLLM) does",
    )
    parser.add_argument("--model", default="fake.gguf", help="the model it says it serves")
    parser.add_argument(
        "--ollama", action="store_true", help="openai: no /health, and `model` required"
    )
    parser.add_argument(
        "--also-list", action="append", default=[], help="openai: another model it lists first"
    )
    parser.add_argument(
        "--no-tool-calls", action="store_true", help="/props: the template makes no tool calls"
    )
    parser.add_argument(
        "--vision", action="store_true", help="/props: it takes images (a vision model)"
    )
    args = parser.parse_args(argv)
    script: list[Reply | Fault] = []
    default = Reply(content=args.reply) if args.reply else None
    if args.script:
        script, scripted_default = load_script(parse_json(args.script.read_bytes()))
        default = scripted_default or default
    fake = FakeLlamaServer(
        script=script,
        exchanges=load_recording(args.replay.read_bytes()).exchanges if args.replay else None,
        default=default,
        api_key=args.api_key,
        n_slots=args.n_slots,
        n_ctx=args.n_ctx,
        timing=Timing(ms_per_token=args.ms_per_token, prompt_ms_per_token=args.prompt_ms_per_token),
        kind=args.kind,
        model=args.model,
        ollama=args.ollama,
        also_listed=tuple(args.also_list),
        tool_calls=not args.no_tool_calls,
        vision=args.vision,
    )

    async def run() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(_hold_on_signals, fake)  # before it says it listens
            port = await nursery.start(_serve, fake, args.host, args.port)
            if args.port_file:
                args.port_file.write_text(f"{port}\n")
            print(f"fake llama-server listening on http://{args.host}:{port}", flush=True)

    with contextlib.suppress(KeyboardInterrupt):
        trio.run(run)
    return 0


async def _hold_on_signals(
    fake: FakeLlamaServer, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
) -> None:
    """Each hold and release is said on stdout, numbered, once done."""
    held = released = 0
    with trio.open_signal_receiver(signal.SIGUSR1, signal.SIGUSR2) as signals:
        task_status.started()
        async for number in signals:
            if number == signal.SIGUSR1:
                fake.hold(0)
                held += 1
                print(f"slot 0 held by another client ({held})", flush=True)
            else:
                fake.release(0)
                released += 1
                print(f"slot 0 released ({released})", flush=True)


async def _serve(
    fake: FakeLlamaServer, host: str, port: int, task_status: trio.TaskStatus[int]
) -> None:
    await fake.serve_tcp(host, port, task_status=task_status)


if __name__ == "__main__":
    raise SystemExit(main())
