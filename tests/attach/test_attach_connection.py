"""An `attach` connection as loopd serves it (`loopd/serve.py`): once the file's bytes have all
come, loopd watches the channel while it checks the file and reads a PDF; a channel that
leaves then cancels that work (the PDF's reader killed), and nothing is kept."""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.channel import encode_frame
from boxmaker.config import FilesConfig
from boxmaker.loopd.serve import handle_connection
from boxmaker.loopd.uploads import Uploads

from ..attached.pdfs import cpu_heavy, written


def daemon(home: Path) -> Any:
    """What an `attach` connection uses of the daemon."""
    limits = FilesConfig(pdf_timeout_s=60)  # the heavy PDF would hold its reader a minute
    return SimpleNamespace(
        config=SimpleNamespace(channel=SimpleNamespace(write_timeout_s=5.0)),
        uploads=Uploads(limits, home),
    )


def readers() -> list[int]:
    """The pids of this process's PDF readers."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines())
            command = (status.parent / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue  # gone meanwhile
        if fields.get("PPid", "").strip() == str(os.getpid()) and b"pdf_worker.py" in command:
            found.append(int(status.parent.name))
    return found


async def reader_started() -> None:
    """Wait (polling /proc) until a reader of this process runs."""
    while not readers():  # noqa: ASYNC110 (another process: no event to wait on)
        await trio.sleep(0.01)


def wire(data: bytes) -> bytes:
    offer = p.FileOffer(
        "report.pdf", "application/pdf", len(data), hashlib.sha256(data).hexdigest()
    )
    pieces = [
        encode_frame(p.FilePieceFrame(base64.b64encode(data[at : at + p.PIECE_BYTES]).decode()))
        for at in range(0, len(data), p.PIECE_BYTES)
    ]
    return encode_frame(p.AttachFrame(offer)) + b"".join(pieces)


async def test_a_pdf_is_read_and_answered(tmp_path: Path) -> None:
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle_connection, server, daemon(tmp_path))
            await client.send_all(wire(written(["The budget is 42 euros."])))
            answer = await client.receive_some()
    assert b'"kind":"attached"' in answer
    assert b'"kind":"pdf"' in answer


async def test_a_channel_that_leaves_while_its_pdf_is_read_stops_the_reading(
    tmp_path: Path,
) -> None:
    client, server = trio.testing.memory_stream_pair()
    with trio.fail_after(20):  # the reader alone would take its 60 s
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handle_connection, server, daemon(tmp_path))
            await client.send_all(wire(cpu_heavy()))
            await reader_started()
            await client.aclose()
    assert not list((tmp_path / "uploads").glob("*"))  # nothing of it kept
    assert readers() == []  # the reader was killed, not left to its 60 s
