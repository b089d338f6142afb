"""The gateway's row (issue 44), against a real Synapse on loopback: the owner's messages go
through the homeserver and gatewayd to loopd (the fake server answering), one at a time.

- **To the turn**: from the owner's send returning (the homeserver has the message) to the
  turn frame of its origin reaching a watch of the room's session: the long poll's wake, the
  gateway's reading and acknowledging, loopd's start.
- **The first post and the first edit**: from loopd's first content event (at the watch) to
  the homeserver's time (`origin_server_ts`) on the gateway's first message of the answer, and on
  its first edit (`[gateway] edit_interval_s` after the first post, at the soonest).
- **gatewayd's CPU per streamed event**: its CPU over the run (every thread, `/proc`), divided
  by the content events loopd streamed.

All on the one machine's wall clock.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path

import trio

from boxmaker.gatewayd.state import session_for

from ..matrix_client import Event, MatrixClient, edits_of, replies_to
from ..processes import Process
from ..synapse import Synapse
from .harness import BIN, BenchError, cpu_seconds, open_stack, open_watch
from .report import Row
from .stats import p90, spread

__all__ = ["run"]

SYNAPSE = (
    (Path(__file__).parents[2] / "tests/gateway/synapse-requirements.txt")
    .read_text()
    .split("==")[1]
    .split()[0]
)


class _Turns:
    """A watch's lines: when each origin's turn frame, first content and end came."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.first_content: dict[str, float] = {}
        self.ended: dict[str, trio.Event] = {}
        self.contents = 0
        self._current = ""

    def take(self, line: bytes, now: float) -> None:
        frame = json.loads(line)
        if frame.get("kind") != "watch_event":
            return
        body = frame["body"]
        inner, origin = body["frame"], (body.get("origin") or {}).get("id", "")
        if inner["kind"] == "turn":
            self._current = origin
            self.started.setdefault(origin, now)
        elif inner["kind"] == "turn_event" and inner["body"]["event"]["type"] == "content":
            self.contents += 1
            self.first_content.setdefault(self._current, now)
        elif inner["final"]:
            self.ended.setdefault(self._current, trio.Event()).set()


async def _watch(socket: Path, session: str, turns: _Turns, ready: trio.Event) -> None:
    stream, rest = await open_watch(socket, session)
    async with stream:
        ready.set()
        while chunk := await stream.receive_some(1 << 16):
            now = time.time()
            *lines, rest = (rest + chunk).split(b"\n")
            for line in lines:
                turns.take(line, now)


async def run(root: Path, *, messages: int, words: int) -> Row:
    reply = " ".join(f"word{n}" for n in range(words))
    to_turn: list[float] = []
    first_post: list[float] = []
    first_edit: list[float] = []
    with Synapse(root / "synapse") as synapse:
        bot, bot_token = synapse.register("bot", secrets.token_hex(8))
        owner, owner_token = synapse.register("owner", secrets.token_hex(8))
        config = (
            f'[gateway.matrix]\nhomeserver = "{synapse.url}"\nuser_id = "{bot}"\n'
            f'owners = ["{owner}"]\naccess_token_env = "BOT_TOKEN"\nsync_timeout_s = 30\n'
        )
        with open_stack(
            root / "stack", "--reply", reply, "--ms-per-token", "2", config=config
        ) as stack:
            env = {**os.environ, "BOXMAKER_HOME": str(stack.loopd.home), "BOT_TOKEN": bot_token}
            gatewayd = Process(
                [str(BIN / "gatewayd"), "serve", "--config", str(root / "stack" / "config.toml")],
                env, root,
            )  # fmt: skip
            try:
                gatewayd.err.wait_for("carrying")
                turns = _Turns()
                async with (
                    MatrixClient(synapse.url, owner_token, owner) as client,
                    trio.open_nursery() as nursery,
                ):
                    room = await client.create_room(invite=[bot])
                    await client.wait_for(
                        lambda events: any(
                            e.get("state_key") == bot
                            and e.get("content", {}).get("membership") == "join"
                            for e in events
                        )
                    )
                    ready = trio.Event()
                    nursery.start_soon(_watch, stack.loopd.socket, session_for(room), turns, ready)
                    await ready.wait()
                    before = cpu_seconds(gatewayd.popen.pid)
                    for n in range(messages):
                        asked = await client.send_text(room, f"Message {n}.")
                        sent = time.time()
                        with trio.fail_after(120):
                            await turns.ended.setdefault(asked, trio.Event()).wait()

                            def shown(events: list[Event], asked: str = asked) -> bool:
                                answers = replies_to(events, asked)
                                return bool(answers) and bool(
                                    edits_of(events, answers[0]["event_id"])
                                )

                            await client.wait_for(shown, timeout=120)
                        answer = replies_to(client.events, asked)[0]
                        edit = edits_of(client.events, answer["event_id"])[0]
                        content = turns.first_content[asked]
                        to_turn.append((turns.started[asked] - sent) * 1000)
                        first_post.append((answer["origin_server_ts"] / 1000 - content) * 1000)
                        first_edit.append((edit["origin_server_ts"] / 1000 - content) * 1000)
                    used = cpu_seconds(gatewayd.popen.pid) - before
                    nursery.cancel_scope.cancel()
            finally:
                gatewayd.stop()
    if turns.contents == 0:
        raise BenchError("no content event was streamed")
    per_event = used / turns.contents * 1e6
    lat, post, edited = spread(to_turn), spread(first_post), spread(first_edit)
    details = (
        f"{messages} owner messages, one at a time, through Synapse {SYNAPSE} on loopback "
        f"and gatewayd to loopd; the fake server answers {words} words at 2 ms a token "
        f"({turns.contents:,} content events in all); `edit_interval_s` 1.0.",
        "",
        "| | median | p90 | least | most |",
        "|---|---|---|---|---|",
        f"| message at the homeserver → turn frame at loopd | {lat.median:.1f} ms | "
        f"{p90(to_turn):.1f} ms | {lat.low:.1f} ms | {lat.high:.1f} ms |",
        f"| first content event → the answer's first post | {post.median:.1f} ms | "
        f"{p90(first_post):.1f} ms | {post.low:.1f} ms | {post.high:.1f} ms |",
        f"| first content event → its first edit | {edited.median:.1f} ms | "
        f"{p90(first_edit):.1f} ms | {edited.low:.1f} ms | {edited.high:.1f} ms |",
        "",
        f"gatewayd's CPU over the run: {used:.2f} s, {per_event:.0f} µs per streamed content event "
        "(its posts, edits and syncs included).",
    )
    return Row(
        figure="gateway: owner message to turn, first post, CPU",
        result=f"message → turn frame median {lat.median:.0f} ms (p90 {p90(to_turn):.0f} ms); "
        f"first post {post.median:.0f} ms after the first content; "
        f"{per_event:.0f} µs CPU per event",
        bar="reported (no bar)",
        met=True,
        details=details,
    )
