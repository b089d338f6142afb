"""A turn that carries an image, through `run_turn` and the fake server that takes images: the
image goes as a part of the message, after its text, its bytes read from the session's files;
the next request of the session is a byte extension of it (SPEC sections 3 and 22)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from boxmaker import layout
from boxmaker import proto as p
from boxmaker.loopd.loop import Carried, run_turn
from boxmaker.store import keep_upload
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import EventLog, open_rig

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def attached_image(home: Path) -> Carried:
    """`PNG` attached (in `<home>/uploads/`), as a turn carries it to a server that takes it."""
    sha = hashlib.sha256(PNG).hexdigest()
    keep_upload(home, sha, PNG, None)
    file = p.TurnFile("dot.png", "image/png", len(PNG), sha)
    return Carried((file,), "", ((sha, layout.upload_file(home, sha)),))


async def test_an_image_is_a_part_of_its_message_and_the_next_request_extends_it(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="A dot."), Reply(content="Yes.")], vision=True)
    carried = attached_image(tmp_path)
    async with open_rig(tmp_path, fake) as rig:
        await run_turn(rig.session, rig.runtime, "What is it?", EventLog(), carried=carried)
        await run_turn(rig.session, rig.runtime, "Is it green?", EventLog())
        records = rig.session.records
    assert not [r for r in records if isinstance(r, p.CacheLossRecord)]  # the cache held
    first, second = fake.requests[0]
    url = f"data:image/png;base64,{base64.b64encode(PNG).decode()}"
    assert first["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is it?"},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert fake.statuses[0] == [200, 200]


async def test_a_session_with_an_image_opens_an_epoch_and_tells_a_loss(tmp_path: Path) -> None:
    replies = [Reply(content="A dot."), Reply(content="Yes."), Reply(content="Sure.")]
    fake = FakeLlamaServer(script=[*replies, Reply(content="A dot, green."), Reply(content="Ok.")],
                           vision=True)  # fmt: skip
    carried = attached_image(tmp_path)
    async with open_rig(tmp_path, fake) as rig:
        await run_turn(rig.session, rig.runtime, "What is it?", EventLog(), carried=carried)
        await run_turn(rig.session, rig.runtime, "Is it green?", EventLog())
        fake.forget(0)  # another client's prompt took the slot: a loss, its cause told
        log = EventLog()
        await run_turn(rig.session, rig.runtime, "Sure?", log)
        [loss] = log.of(p.CacheLoss)
        assert loss.cause is p.LossCause.EVICTED  # the image is the same: no prefix changed
        await run_turn(rig.session, rig.runtime, "Again.", EventLog(), new_epoch=True)
        assert rig.session.epoch == 1  # its summary was asked with the image in it
