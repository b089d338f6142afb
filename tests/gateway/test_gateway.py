"""gatewayd against a real homeserver (issue 44): the owner's messages answered in their
room, exactly once; strangers cost nothing."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from bxdev.synapse import Synapse

from boxmaker.gatewayd.state import session_for

from ..processes import BIN, wait_until
from .conftest import Account
from .rig import GatewayRig, answer_of, answers_to

SCRIPT = {"replies": [{"content": "Hello from the agent."}], "default": {"content": "Later."}}


@pytest.fixture
def rig(tmp_path: Path, synapse: Synapse, bot: Account, owner: Account) -> Iterator[GatewayRig]:
    running = GatewayRig(tmp_path, synapse, bot, owner, SCRIPT)
    try:
        running.start_gatewayd()
        yield running
    finally:
        running.stop()


async def test_the_owner_s_message_is_answered_in_the_room(rig: GatewayRig) -> None:
    with trio.fail_after(60):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            asked = await owner.send_text(room, "Hi there")
            answer = await answer_of(owner, asked, "Hello from the agent.")
            assert answer["sender"] == rig.bot.user_id
            assert await owner.latest_text_of(room, answer["event_id"]) == "Hello from the agent."
            assert len(answers_to(owner.events, asked)) == 1
    status = rig.stack.home / "run" / "gateway" / "status.json"
    assert stat.S_IMODE(os.stat(status).st_mode) == 0o600
    wait_until(lambda: session_for(room) in status.read_text(), "the status showing the room")
    done = await trio.run_process(
        [str(BIN / "bxctl"), "gateway"], env=rig.stack.env, capture_stdout=True, check=True
    )
    shown = done.stdout.decode()
    assert f"as {rig.bot.user_id}" in shown
    assert ": connected; loopd reached" in shown
    assert f"{room}  {session_for(room)}  1" in shown
    assert rig.gatewayd is not None
    rig.gatewayd.popen.terminate()  # SIGTERM: a clean stop
    assert rig.gatewayd.wait() == 0
    rig.gatewayd.err.wait_for("gatewayd INFO stopped")
    assert not status.exists()  # bxctl gateway then says it is not running


async def test_a_password_login_keeps_its_token_0600_and_uses_it_again(
    tmp_path: Path, synapse: Synapse, bot: Account, owner: Account
) -> None:
    rig = GatewayRig(tmp_path, synapse, bot, owner, SCRIPT)
    config = rig.stack.config.read_text().replace(
        'access_token_env = "BOT_TOKEN"', 'password_env = "BOT_PASSWORD"'
    )
    rig.stack.config.write_text(config)
    rig.stack.env["BOT_PASSWORD"] = bot.password
    try:
        first = rig.start_gatewayd()
        first.err.wait_for("signed in as")
        token = rig.stack.home / "gateway" / "token.json"
        assert stat.S_IMODE(os.stat(token).st_mode) == 0o600
        kept = json.loads(token.read_text())["access_token"]
        assert kept
        assert kept != bot.token
        rig.gatewayd.stop()  # type: ignore[union-attr]
        second = rig.start_gatewayd()
        assert "signed in as" not in second.err.text()  # the kept token, no second login
        with trio.fail_after(60):
            async with await rig.client() as client:
                room = await rig.direct_room(client)
                await answer_of(client, await client.send_text(room, "Hi"), "Hello from the agent.")
    finally:
        rig.stop()
