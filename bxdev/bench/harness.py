"""What the rows of `make bench` share: the fake server and `loopd serve` as real processes,
minimal clients that time a turn on the channel or a completion straight from the server, and
readings of a process's CPU time and memory from `/proc`.

The clients here are deliberately minimal: they look for a few bytes in what they receive and
decode nothing, so a figure measures loopd and the server, not the client.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import httpx
import trio

from boxmaker import SYSTEM_MD
from boxmaker.channel import encode_frame
from boxmaker.proto import SessionId, TurnFrame

from ..processes import Process

__all__ = [
    "BenchError",
    "Loopd",
    "Stack",
    "TurnTimes",
    "cpu_seconds",
    "direct_completion",
    "loop_cpu_seconds",
    "open_fake",
    "open_loopd",
    "open_stack",
    "peak_rss_mb",
    "session_log",
    "timed_turn",
    "turn_frame",
]

BIN = Path(sys.executable).parent
SYSTEM = SYSTEM_MD.read_text()
# The rows on the real server run the model's own template, with no tool descriptions in the
# prompt (the device tier's conversation): under `auto`, SmolLM2's fenced profile answers
# "Hello!" with a tool block, a second completion, not the conversation the peers and the
# clock client have.
NATIVE = '[model]\nprofile = "native"\n'
CONTENT_FRAME = b'"type":"content"'  # a line of a content event, on the channel
CONTENT_CHUNK = b'"content":"'  # and in the server's stream
FINAL = b'"final":true'
START_S = 300.0


class BenchError(Exception):
    """A run went wrong (a process died, a turn failed): the figure would mean nothing."""


@attrs.frozen
class TurnTimes:
    """Seconds from connecting: to the first content, to the last, to the end; and how many
    content events came."""

    first: float
    last: float
    total: float
    events: int


@attrs.frozen
class Loopd:
    process: subprocess.Popen[bytes]
    socket: Path
    home: Path
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid


@attrs.frozen
class Stack:
    fake: Process
    loopd: Loopd
    url: str


@contextmanager
def open_loopd(
    root: Path, url: str, *, config: str = "", wrap: tuple[str, ...] = ()
) -> Iterator[Loopd]:
    """`loopd serve` in `root` (its home `root/home`) for the server at `url`, run by `wrap`
    when given (a profiler that starts it: its `pid` is then the profiler's).

    Its log goes to `root/loopd.log`, not to a pipe this process reads: a reader here would
    wake with every log line and take time from the clients being timed.
    """
    root.mkdir(parents=True, exist_ok=True)
    home = root / "home"
    (root / "system.md").write_text(SYSTEM)
    (root / "config.toml").write_text(f'[server]\nbase_url = "{url}"\n{config}')
    env = {**os.environ, "BOXMAKER_HOME": str(home)}
    args = [*wrap, str(BIN / "loopd"), "serve", "--config", str(root / "config.toml")]
    log = root / "loopd.log"
    with log.open("wb") as out:
        process = subprocess.Popen(args, env=env, cwd=root, stdout=out, stderr=out)
    try:
        _wait_listening(process, log)
        yield Loopd(process, home / "run" / "loop" / "loop.sock", home, log)
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_listening(process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_S
    while b"listening on" not in log.read_bytes():
        if process.poll() is not None or time.monotonic() > deadline:
            raise BenchError(f"loopd did not start:\n{log.read_text(errors='replace')}")
        time.sleep(0.01)  # a process starting: nothing to wait on but its log


@contextmanager
def open_fake(root: Path, *fake_args: str) -> Iterator[tuple[Process, str]]:
    """The fake server on a TCP port (with `fake_args`), run in `root`, and its URL."""
    root.mkdir(parents=True, exist_ok=True)
    fake_cmd = [str(BIN / "python"), "-m", "boxmaker.testing", *fake_args]
    fake = Process(fake_cmd, dict(os.environ), root)
    try:
        yield fake, fake.out.wait_for("listening on").split()[-1]
    finally:
        fake.stop()


@contextmanager
def open_stack(root: Path, *fake_args: str, config: str = "") -> Iterator[Stack]:
    """The fake server on a TCP port (with `fake_args`) and `loopd serve` in `root`."""
    with open_fake(root, *fake_args) as (fake, url), open_loopd(root, url, config=config) as loopd:
        yield Stack(fake, loopd, url)


def turn_frame(session: str, content: str, *, resume: bool) -> bytes:
    return encode_frame(TurnFrame(SessionId(session), content, resume=resume))


@attrs.define
class _Tally:
    """Counts the lines holding `marker` as chunks come, and when the first and last came."""

    marker: bytes
    first: float = 0.0
    last: float = 0.0
    events: int = 0
    rest: bytes = b""

    def feed(self, chunk: bytes, now: float) -> bytes:
        """The complete lines `chunk` ends, counted."""
        data = self.rest + chunk
        cut = data.rfind(b"\n") + 1
        lines, self.rest = data[:cut], data[cut:]
        if count := lines.count(self.marker):
            self.first = self.first or now
            self.last = now
            self.events += count
        return lines

    def times(self, total: float) -> TurnTimes:
        return TurnTimes(self.first, self.last, total, self.events)


async def timed_turn(socket: Path, frame: bytes) -> TurnTimes:
    """Send one turn frame and read until the final frame, noting when content came.

    Raises:
        BenchError: the turn did not end with `turn_done`.
    """
    start = time.perf_counter()
    tally = _Tally(CONTENT_FRAME)
    stream = await trio.open_unix_socket(str(socket))
    async with stream:
        await stream.send_all(frame)
        while True:
            chunk = await stream.receive_some(1 << 16)
            now = time.perf_counter() - start
            if not chunk:
                raise BenchError("loopd closed the connection before the final frame")
            lines = tally.feed(chunk, now)
            if FINAL in lines:
                final = lines[lines.rfind(b"\n", 0, len(lines) - 1) + 1 :]
                if b'"kind":"turn_done"' not in final:
                    raise BenchError(f"the turn failed: {final.decode(errors='replace')}")
                return tally.times(now)


async def direct_completion(http: httpx.AsyncClient, body: bytes) -> TurnTimes:
    """Stream one completion straight from the server, noting when content came.

    Raises:
        BenchError: the server did not answer 200.
    """
    start = time.perf_counter()
    tally = _Tally(CONTENT_CHUNK)
    async with http.stream(
        "POST", "/v1/chat/completions", content=body,
        headers={"Content-Type": "application/json"},
    ) as response:  # fmt: skip
        if response.status_code != 200:
            raise BenchError(f"the server answered {response.status_code}")
        async for chunk in response.aiter_raw():
            tally.feed(chunk, time.perf_counter() - start)
    return tally.times(time.perf_counter() - start)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15 of proc(5)
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


def loop_cpu_seconds(pid: int) -> float:
    """CPU time the main thread of a process (loopd's event loop) has run so far, as the
    scheduler counts it (`/proc/<pid>/schedstat`, nanoseconds), where `cpu_seconds` counts
    whole clock ticks (10 ms): fine enough to read per turn."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9


def peak_rss_mb(pid: int) -> float:
    """The most resident memory a live process has had (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmHWM for process {pid}")


def session_log(home: Path, session: str) -> list[dict[str, object]]:
    path = home / "sessions" / session / "0.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


async def open_watch(socket: Path, session: str) -> tuple[trio.SocketStream, bytes]:
    """A `watch` of `session` in place (its `watching` frame read): the stream, and what came
    after that frame."""
    stream = await trio.open_unix_socket(str(socket))
    frame = {"kind": "watch", "final": False, "body": {"sessions": [session]}}
    await stream.send_all(json.dumps(frame).encode() + b"\n")
    seen = b""
    while b'"kind":"watching"' not in seen:
        seen += await stream.receive_some(1 << 16)
    return stream, seen.split(b'"kind":"watching"', 1)[1].partition(b"\n")[2]
