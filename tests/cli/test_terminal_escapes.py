"""The terminal: text from the model or the server reaches a terminal with its
control characters shown, not obeyed; `--json` and piped output keep the exact text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boxmaker import proto as p
from boxmaker.cli import render
from boxmaker.cli.chat_command import run_chat
from boxmaker.cli.render import Renderer

from ..processes import BIN, Stack, Terminal
from .test_bxctl import args, fake_loopd

CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: writes the clipboard
TITLE = "\x1b]0;you have mail\x07"  # OSC 0: the window's title
CLEAR = "\x1b[2J"  # clears the screen
HOSTILE = f"Sure.{CLIPBOARD} Done.{TITLE}\n\tNext:{CLEAR} bye\r\x9b1m."
SHOWN = (
    "Sure.\\x1b]52;c;cm0gLXJmIH4=\\x07 Done.\\x1b]0;you have mail\\x07\n"
    "\tNext:\\x1b[2J bye\\x0d\\x9b1m."
)
USAGE = p.Usage(0, 1, 1, 0, False)


def test_shown_escapes_every_control_character_but_newline_and_tab() -> None:
    shown = render.escape_controls
    assert shown(HOSTILE) == SHOWN
    controls = [chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]]
    assert [c for c in controls if shown(c) == c] == ["\t", "\n"]
    assert shown("é漢🙂 plain") == "é漢🙂 plain"


def test_on_a_terminal_the_model_s_text_is_shown_escaped() -> None:
    r = Renderer(tty=True, color=True)
    out = r.event(p.Content(HOSTILE)) + r.event(p.Reasoning(CLEAR))
    out += r.event(p.ToolCallStarted(f"clock{TITLE}"))
    out += r.event(p.Retrying(2, 10, f"the server said {CLEAR}"))
    assert SHOWN in out
    assert "\\x1b[2J" in out
    assert "clock\\x1b]0;you have mail\\x07" in out
    assert "the server said \\x1b[2J" in out
    for raw in (CLIPBOARD, TITLE, CLEAR, "\r", "\x9b"):
        assert raw not in out


def test_piped_the_text_is_exact_and_an_error_line_is_always_escaped() -> None:
    r = Renderer(tty=False, color=False)
    assert r.event(p.Content(HOSTILE)) == HOSTILE
    error = r.error(p.WireError(p.ErrorCode.INFERENCE, f"the server answered 500: {CLEAR}"))
    assert error == "error: inference: the server answered 500: \\x1b[2J\n"


async def test_json_keeps_the_exact_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    answer = [p.TurnEventFrame(p.Content(HOSTILE)), p.TurnDoneFrame(HOSTILE, USAGE)]
    async with fake_loopd(tmp_path, [answer]):
        assert await run_chat(args(tmp_path, "--json", "--session", "s1", "--say", "Hi"), {}) == 0
    frames = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    bodies = [f["body"] for f in frames if f["kind"] in ("turn_event", "turn_done")]
    assert bodies == [
        {"event": {"type": "content", "text": HOSTILE}},
        {"content": HOSTILE, "usage": p.unstructure(USAGE)},
    ]


@pytest.mark.parametrize("mode", ["--say", "interactive"])
def test_bxctl_on_a_terminal_shows_escapes_instead_of_obeying_them(
    tmp_path: Path, mode: str
) -> None:
    stack = Stack(tmp_path, {"default": {"content": HOSTILE}})
    argv = [str(BIN / "bxctl"), "chat", "--session", "t1"]
    term = Terminal([*argv, "--say", "Hi."] if mode == "--say" else argv, stack.env)
    try:
        if mode == "interactive":
            term.wait_for_prompt()
            term.type("Hi.\r")
        shown = term.wait_for("bye\\x0d\\x9b1m.")  # the whole answer, as shown
        if mode == "interactive":
            term.wait_for_prompt(shown)  # the turn is over: /quit now is a command, not a message
            term.type("/quit\r")
        assert term.exit_code() == 0
    finally:
        term.kill()
        stack.stop()
    screen = term.screen.replace("\r\n", "\n")  # the terminal's own line ends
    assert "Sure.\\x1b]52;c;cm0gLXJmIH4=\\x07 Done.\\x1b]0;you have mail\\x07" in screen
    assert "\\x1b[2J bye\\x0d\\x9b1m." in screen
    assert "\x1b]52" not in screen
    assert "\x1b]0" not in screen
    assert CLEAR not in screen
