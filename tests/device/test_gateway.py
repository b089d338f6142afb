"""One owner message through a real homeserver to the real model (issue 44): `make gateway`
starts llama-server, brokerd, loopd and gatewayd from a config with `[gateway.matrix]`; the
owner writes in a direct room with the bot; the answer's last edit is the model's answer."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import trio
from bxdev.matrix_client import MatrixClient
from bxdev.run import prepare
from bxdev.synapse import Synapse, synapse_python

from ..gateway.rig import answers_to, latest_text
from .conftest import figure
from .test_run import make, running, started_pids


@pytest.fixture
def synapse(tmp_path: Path) -> Synapse:
    if not synapse_python().exists():
        pytest.fail(f"Synapse is not installed at {synapse_python()}: run `make synapse`")
    return Synapse(tmp_path / "synapse")


async def test_an_owner_message_through_synapse_to_the_real_model(
    tmp_path: Path, synapse: Synapse
) -> None:
    root = tmp_path / "run"
    root.mkdir()
    with synapse:
        bot, _token = synapse.register("bot", "bot-password")
        owner, owner_token = synapse.register("owner", "owner-password")
        config = prepare(root)
        config.write_text(
            config.read_text() + f'\n[gateway.matrix]\nhomeserver = "{synapse.url}"\n'
            f'user_id = "{bot}"\nowners = ["{owner}"]\npassword_env = "BOT_PASSWORD"\n'
        )  # fmt: skip
        os.environ["BOT_PASSWORD"] = "bot-password"
        try:
            served = make(root, "gateway")
            assert served.returncode == 0, served.stderr
            assert "started gatewayd (pid " in served.stderr
            began = time.monotonic()
            with trio.fail_after(240):
                async with MatrixClient(synapse.url, owner_token, owner) as client:
                    room = await client.create_room(invite=[bot])
                    asked = await client.send_text(room, "Say hello in five words.")
                    await client.wait_for(lambda e: bool(answers_to(e, asked)), timeout=200)
                    answered = time.monotonic() - began
                    session = json.loads((root / "home" / "run" / "gateway" / "status.json")
                                         .read_text())["rooms"][0]["session"]  # fmt: skip
                    log = root / "home" / "sessions" / session / "0.jsonl"

                    def said() -> str | None:
                        records = [json.loads(line) for line in log.read_text().splitlines()]
                        if records[-1]["type"] != "turn_end":
                            return None
                        return next(
                            r["content"] for r in reversed(records) if r["type"] == "assistant"
                        )

                    def whole(events: list[dict[str, object]]) -> bool:
                        answer = answers_to(events, asked)[0]["event_id"]
                        return (text := said()) is not None and latest_text(events, answer) == text  # type: ignore[arg-type]

                    await client.wait_for(whole, timeout=120, what="the answer's last edit")
            figure(f"gateway: the owner's message answered in the room in {answered:.1f} s")
        finally:
            stopped = make(root, "stop")
            os.environ.pop("BOT_PASSWORD", None)
    assert "gatewayd" in stopped.stderr
    assert [pid for pid in started_pids(served.stderr).values() if running(pid)] == []
