"""Files and images the owner sends in the room (issue 48, part 1), against the real
homeserver: each uploaded through Synapse's media API and sent as `m.file` or `m.image`;
the gateway fetches it (authenticated media), brings it to loopd, and the turn carries it (the
session's `user` record names it, the session keeps it). A file without a caption waits for
the next message, one with a caption is a message; what loopd or the gateway refuses is said
in the room in words, and nothing runs."""

from __future__ import annotations

import hashlib
import subprocess
import zlib
from typing import Any

import trio
from bxdev.matrix_client import Event, MatrixClient

from boxmaker.gatewayd.state import session_for

from ..processes import BIN, WAIT_S
from .conftest import MakeRig
from .rig import GatewayRig, answer_of, answers_to, user_records

SCRIPT = {"replies": [], "default": {"content": "Read it."}}
NOTES = b"# Shopping\n- tea\n- milk\n"


def png() -> bytes:
    """A real 1x1 PNG, written by hand (zlib and CRCs)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return len(data).to_bytes(4, "big") + body + zlib.crc32(body).to_bytes(4, "big")

    header = (1).to_bytes(4, "big") * 2 + bytes([8, 2, 0, 0, 0])
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


async def send(
    owner: MatrixClient, room: str, data: bytes, media_type: str, name: str, *,
    caption: str | None = None, msgtype: str = "m.file", size: int | None = None,
) -> str:  # fmt: skip
    """Upload `data` and send it in `room` (with `caption`, if any): the event's id."""
    url = await owner.upload(data, media_type, name)
    info = {"mimetype": media_type, "size": len(data) if size is None else size}
    if caption is None:
        return await owner.send_file(room, url, name, msgtype=msgtype, info=info)
    return await owner.send_file(room, url, caption, msgtype=msgtype, filename=name, info=info)


async def said_to(owner: MatrixClient, event_id: str, what: str = "") -> str:
    """The first thing the bot said in reply to `event_id`."""
    await owner.wait_for(lambda events: bool(answers_to(events, event_id)), what=what or event_id)
    body: str = answers_to(owner.events, event_id)[0]["content"]["body"]
    return body


def files_of(rig: GatewayRig, room: str) -> list[list[dict[str, Any]]]:
    return [r.get("files", []) for r in user_records(rig.stack, session_for(room))]


def kept(rig: GatewayRig, room: str, sha256: str) -> bytes:
    return (rig.stack.home / "sessions" / session_for(room) / "files" / sha256).read_bytes()


def verify(rig: GatewayRig, room: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "bxctl"), "verify", session_for(room)], env=rig.stack.env,
        capture_output=True, text=True, timeout=WAIT_S, check=False,
    )  # fmt: skip


async def test_a_file_waits_for_the_next_message_and_an_image_goes_with_its_caption(
    make_rig: MakeRig,
) -> None:
    rig = make_rig(fake_args=("--vision",))
    image = png()
    with trio.fail_after(90):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            notes = await send(owner, room, NOTES, "text/markdown", "notes.md")
            got = await said_to(owner, notes, "the file taken")
            assert got == (
                f"Got `notes.md` (text/markdown, {len(NOTES)} bytes): it goes with your next "
                "message."
            )
            assert user_records(rig.stack, session_for(room)) == []  # nothing ran yet
            asked = await owner.send_text(room, "What do I buy?")
            await answer_of(owner, asked, "Read it.")
            photo = await send(
                owner, room, image, "image/png", "IMG_0001.png", caption="What is this?",
                msgtype="m.image",
            )  # fmt: skip
            await answer_of(owner, photo, "Read it.")
    first, second = user_records(rig.stack, session_for(room))
    assert first["content"] == "What do I buy?"
    assert first["origin"] == {"channel": "matrix", "id": asked}
    [text_file] = first["files"]
    assert text_file == {
        "name": "notes.md", "media_type": "text/markdown", "size": len(NOTES),
        "sha256": hashlib.sha256(NOTES).hexdigest(),
    }  # fmt: skip
    assert "- milk" in first["attached"]
    assert second["content"] == "What is this?"
    assert second["origin"] == {"channel": "matrix", "id": photo}
    [image_file] = second["files"]
    assert (image_file["name"], image_file["media_type"]) == ("IMG_0001.png", "image/png")
    assert kept(rig, room, text_file["sha256"]) == NOTES
    assert kept(rig, room, image_file["sha256"]) == image
    assert verify(rig, room).returncode == 0


async def test_what_is_refused_is_said_in_words_and_nothing_runs(make_rig: MakeRig) -> None:
    rig = make_rig(extra="\n[files]\nmax_bytes = 5000\n")  # the fake takes no image
    with trio.fail_after(90):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            photo = await send(
                owner, room, png(), "image/png", "cat.png", caption="What is it?",
                msgtype="m.image",
            )  # fmt: skip
            seen = await said_to(owner, photo, "the image refused")
            big = await send(owner, room, b"x" * 5001, "text/plain", "big.txt")
            said_big = await said_to(owner, big, "a file said to be too large")
            quiet = await send(owner, room, b"y" * 5001, "text/plain", "quiet.txt", size=10)
            said_quiet = await said_to(owner, quiet, "a file larger than it said")
            liar = await send(owner, room, NOTES, "image/png", "fake.png", msgtype="m.image")
            said_liar = await said_to(owner, liar, "a file that is not what it says")
            secret = await owner.send(room, "m.room.message", {
                "msgtype": "m.file", "body": "secret.txt",
                "file": {"url": "mxc://localhost/x", "key": {}, "iv": "", "hashes": {}},
            })  # fmt: skip
            said_secret = await said_to(owner, secret, "an encrypted file refused")
            nowhere = await owner.send(room, "m.room.message", {
                "msgtype": "m.file", "body": "x.txt", "url": "mxc://../_matrix/client/v3/x",
            })  # fmt: skip
            said_nowhere = await said_to(owner, nowhere, "a file with no mxc address")
            gone = await owner.send(room, "m.room.message", {
                "msgtype": "m.file", "body": "gone.txt", "url": "mxc://localhost/NoSuchMedia",
            })  # fmt: skip
            said_gone = await said_to(owner, gone, "a file the homeserver does not have")
            after = await owner.send_text(room, "Hello.")
            await answer_of(owner, after, "Read it.")
    assert "does not take images" in seen
    assert "Nothing ran" in seen
    assert "`big.txt` is 5,001 bytes, over the 5,000" in said_big
    assert "not fetched" in said_big
    assert "`quiet.txt` is over the 5,000 bytes this agent takes" in said_quiet
    assert "declared image/png but its bytes are not a PNG image" in said_liar
    assert "an encrypted file" in said_secret
    assert "this was a file whose address is not an mxc:// URI" in said_nowhere
    assert "could not be fetched" in said_gone
    assert "M_NOT_FOUND" in said_gone
    # Only the last message ran, and it carried none of them.
    assert [r["content"] for r in user_records(rig.stack, session_for(room))] == ["Hello."]
    assert files_of(rig, room) == [[]]


def waiting_told(events: list[Event], file_event: str) -> bool:
    return any(e["content"]["body"].startswith("Got ") for e in answers_to(events, file_event))


async def test_a_waiting_file_outlives_a_restart_of_loopd_or_of_the_gateway(
    make_rig: MakeRig,
) -> None:
    rig = make_rig()
    with trio.fail_after(120):
        async with await rig.client() as owner:
            room = await rig.direct_room(owner)
            await answer_of(owner, await owner.send_text(room, "Hi."), "Read it.")
            first = await send(owner, room, NOTES, "text/markdown", "notes.md")
            await owner.wait_for(lambda events: waiting_told(events, first))
            rig.stack.loopd.stop()  # its uploads go with it
            rig.stack.loopd = rig.stack.start_loopd()
            rig.stack.loopd.err.wait_for("listening on")
            asked = await owner.send_text(room, "Now?")
            await answer_of(owner, asked, "Read it.")
            other = b"second file\n"
            second = await send(owner, room, other, "text/plain", "second.txt")
            await owner.wait_for(lambda events: waiting_told(events, second))
            rig.kill_gatewayd()
            rig.start_gatewayd()
            again = await owner.send_text(room, "And now?")
            await answer_of(owner, again, "Read it.")
    names = [[f["name"] for f in files] for files in files_of(rig, room)]
    assert names == [[], ["notes.md"], ["second.txt"]]
    assert rig.gatewayd is not None
    assert "again for its turn" in "\n".join(rig.logs)  # attached again, by its hash
