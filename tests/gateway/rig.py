"""The gateway tier's rig: a Stack (the fake llama-server, brokerd, loopd) with gatewayd
beside it, pointed at the real homeserver, and the owner's Matrix client in a direct room with
the bot. Waiting is for events (a process's line, a `/sync`), each with a deadline."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bxdev.matrix_client import Event, MatrixClient, edits_of, replies_to
from bxdev.synapse import Synapse

from ..processes import BIN, Process, Stack
from .conftest import Account

__all__ = ["GatewayRig", "answers_to", "bot_messages", "pending_count"]

answers_to = replies_to


def gateway_config(
    synapse: Synapse, bot: Account, owners: list[str], extra: str = "", matrix: str = ""
) -> str:
    listed = ", ".join(f'"{o}"' for o in owners)
    return (
        f"[gateway]\nedit_interval_s = 0.2\n{extra}\n"
        f'[gateway.matrix]\nhomeserver = "{synapse.url}"\n'
        f'user_id = "{bot.user_id}"\nowners = [{listed}]\naccess_token_env = "BOT_TOKEN"\n'
        f"sync_timeout_s = 5\n{matrix}\n"
    )


class GatewayRig:
    def __init__(
        self, root: Path, synapse: Synapse, bot: Account, owner: Account, script: dict[str, Any],
        *, extra: str = "", matrix: str = "", owners: list[str] | None = None,
        policy: str | None = None, fake_args: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self.synapse = synapse
        self.bot = bot
        self.owner = owner
        config = gateway_config(synapse, bot, owners or [owner.user_id], extra, matrix)
        root.mkdir(parents=True, exist_ok=True)
        self.stack = Stack(root, script, *fake_args, config=config, policy=policy)
        self.stack.env["BOT_TOKEN"] = bot.token
        self.gatewayd: Process | None = None
        self.logs: list[str] = []  # of the gatewayds killed

    def start_gatewayd(self) -> Process:
        self.gatewayd = Process(
            [str(BIN / "gatewayd"), "serve", "--config", str(self.stack.config)],
            self.stack.env,
            self.stack.root,
        )
        self.gatewayd.err.wait_for("carrying")
        return self.gatewayd

    def stop_gatewayd(self) -> None:
        """SIGTERM, its end waited for (its log kept)."""
        assert self.gatewayd is not None
        self.gatewayd.stop()
        self.logs.append(self.gatewayd.err.text())

    def kill_gatewayd(self) -> None:
        assert self.gatewayd is not None
        os.kill(self.gatewayd.popen.pid, signal.SIGKILL)
        self.gatewayd.stop()
        self.logs.append(self.gatewayd.err.text())

    def stop(self) -> None:
        if self.gatewayd is not None:
            self.gatewayd.stop()
            self.logs.append(self.gatewayd.err.text())
            (self.stack.root / "gatewayd.log").write_text("\n---\n".join(self.logs))
        self.stack.stop()

    async def client(self, account: Account | None = None) -> MatrixClient:
        account = account or self.owner
        return MatrixClient(self.synapse.url, account.token, account.user_id)

    async def direct_room(self, client: MatrixClient, **options: Any) -> str:
        """A direct room of the owner's with the bot, once the bot has joined it."""
        room = await client.create_room(invite=[self.bot.user_id], **options)
        await client.wait_for(
            lambda events: any(
                e.get("room_id") == room and e.get("type") == "m.room.member"
                and e.get("state_key") == self.bot.user_id
                and e.get("content", {}).get("membership") == "join"
                for e in events
            ),
            what="the bot joining",
        )  # fmt: skip
        return room


def bot_messages(events: list[Event], room: str, bot: str) -> list[Event]:
    """The bot's messages in `room` (edits left out), in order."""
    return [
        e for e in events
        if e.get("room_id") == room and e.get("sender") == bot and e.get("type") == "m.room.message"
        and e.get("content", {}).get("m.relates_to", {}).get("rel_type") != "m.replace"
    ]  # fmt: skip


def waiting_for(predicate: Callable[[list[Event]], bool]) -> Callable[[list[Event]], bool]:
    return predicate


def latest_text(events: list[Event], event_id: str) -> str | None:
    """`event_id`'s text after its newest edit by its own sender, from the events seen."""
    original = next((e for e in events if e.get("event_id") == event_id), None)
    if original is None:
        return None
    text = original.get("content", {}).get("body")
    for e in edits_of(events, event_id):
        if e.get("sender") == original.get("sender"):
            text = e["content"].get("m.new_content", {}).get("body")
    return text if isinstance(text, str) else None


async def answer_of(client: MatrixClient, asked: str, text: str, timeout: float = 30) -> Event:
    """The reply to `asked`, once its newest edit says `text`."""

    def answered(events: list[Event]) -> bool:
        replies = answers_to(events, asked)
        return bool(replies) and latest_text(events, replies[0]["event_id"]) == text

    await client.wait_for(answered, timeout, f"the answer {text!r} to {asked}")
    return answers_to(client.events, asked)[0]


def user_records(stack: Stack, session: str) -> list[dict[str, Any]]:
    """The `user` records of `session`'s first epoch ([] when it does not exist)."""
    path = stack.home / "sessions" / session / "0.jsonl"
    if not path.exists():
        return []
    return [r for r in stack.log(session) if r["type"] == "user"]


def from_bot(events: list[Event], room: str, bot: str, text: str) -> list[Event]:
    """The bot's messages in `room` whose body holds `text`."""
    return [e for e in bot_messages(events, room, bot) if text in e["content"].get("body", "")]


def membership(events: list[Event], room: str, user: str) -> str | None:
    """`user`'s latest membership in `room` among the events seen."""
    found = None
    for e in events:
        if (
            e.get("room_id") == room
            and e.get("type") == "m.room.member"
            and e.get("state_key") == user
        ):
            found = e.get("content", {}).get("membership")
    return found


def pending_count(rig: GatewayRig) -> int:
    """The messages gatewayd's status file says wait for their answers (-1: no file yet)."""
    status = rig.stack.home / "run" / "gateway" / "status.json"
    try:
        return int(json.loads(status.read_text())["pending"])
    except (OSError, ValueError, KeyError):
        return -1
