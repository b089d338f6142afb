"""A channel's `attach` (`client/requests.py`): loopd's answer, or `ChannelError` when loopd
goes away before it answers (never an exception group a caller does not catch)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from boxmaker.client import ChannelError, attach, offer_of


async def test_loopd_leaving_before_it_answers_is_a_channel_error(tmp_path: Path) -> None:
    path = tmp_path / "loop.sock"
    listener = trio.socket.socket(trio.socket.AF_UNIX)
    await listener.bind(str(path))
    listener.listen()

    async def hang_up() -> None:
        peer, _ = await listener.accept()
        await peer.recv(1024)  # the attach frame: then it goes, without a word
        peer.close()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(hang_up)
            data = b"remember the milk\n"
            with pytest.raises(ChannelError):
                await attach(path, offer_of("notes.txt", "text/plain", data), data)
    listener.close()
