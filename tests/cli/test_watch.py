"""The chat's view of other channels' turns: whole lines go above the line editor's prompt, and
never inside the chat's own turn."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TextIO

import trio
import trio.testing

from boxmaker import proto as p
from boxmaker.cli.chat import Chat
from boxmaker.cli.render import Renderer
from boxmaker.cli.watch import Above, Others, Shown

S1 = p.SessionId("s1")


def test_text_goes_above_the_prompt_a_whole_line_at_a_time() -> None:
    written: list[str] = []

    def above(text: str, stream: TextIO) -> None:
        written.append(text)

    lines = Above(above, io.StringIO())
    lines.write("Later ")
    lines.write("answer")
    assert written == []  # a line is written once it is whole
    lines.write(".\nNext line,\nand a part")
    assert written == ["Later answer.\nNext line,\n"]
    lines.write(" of it.\n")
    assert written == ["Later answer.\nNext line,\n", "and a part of it.\n"]


async def test_another_turn_waits_while_the_chats_own_is_on_the_screen(tmp_path: Path) -> None:
    out = io.StringIO()
    renderer = Renderer(tty=False, color=False, width=80)
    chat = Chat(tmp_path / "loop.sock", S1, resume=True, thinking=True, mode="stream", out=out,
                err=io.StringIO(), renderer=renderer)  # fmt: skip
    others = Others(chat)
    shown = Shown(chat)
    other = p.WatchEventFrame(S1, p.Origin("matrix", "$e"), p.TurnFrame(S1, "Other.", resume=True))
    async with trio.open_nursery() as nursery:
        await chat.on_screen.acquire()  # the chat's own turn streams
        nursery.start_soon(others.show, shown, other, nursery)
        await trio.testing.wait_all_tasks_blocked()
        assert "Other." not in out.getvalue()
        chat.on_screen.release()  # its final frame came
        await trio.testing.wait_all_tasks_blocked()
        assert "> Other." in out.getvalue()


async def test_the_chats_own_turn_holds_the_screen_past_the_mailbox_to_its_final() -> None:
    chat = Chat(Path("/nonexistent"), S1, resume=True, thinking=True, mode="stream",
                out=io.StringIO(), err=io.StringIO(),
                renderer=Renderer(tty=False, color=False, width=80))  # fmt: skip
    frames = [
        p.TurnEventFrame(p.QueuedMessage(ahead=1)),
        p.TurnEventFrame(p.Content("Hel")),
        p.TurnEventFrame(p.Content("lo.")),
        p.TurnDoneFrame("Hello.", p.Usage(0, 0, 0, 0, False)),
    ]
    held: list[bool] = []

    class Source:
        async def receive(self) -> p.Frame:
            held.append(chat.on_screen.locked())
            return frames.pop(0)

    async with trio.open_nursery() as asking:
        final = await chat._frames(Source(), True, asking)  # type: ignore[arg-type]
    assert isinstance(final, p.TurnDoneFrame)
    assert held == [False, False, True, True]  # queued: free; then held to the final
    assert not chat.on_screen.locked()
