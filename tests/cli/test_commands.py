"""What a typed line means to bxctl chat, the exit codes, and /stats. Pure."""

from __future__ import annotations

import pytest

from boxmaker import proto as p
from boxmaker.cli.commands import (
    COMMANDS,
    EXIT_CANCELLED,
    EXIT_CODES,
    EXIT_CONNECTION_LOST,
    EXIT_NO_LOOPD,
    EXIT_OTHER,
    EXIT_TOO_LONG,
    EXIT_USAGE,
    BlockReader,
    Command,
    Message,
    TurnFigures,
    Unknown,
    block_open,
    help_text,
    interpret,
    stats_text,
)

CASES = [
    ("Hello", Message("Hello")),
    ("   ", None),
    ("/help", Command("/help", "")),
    ("  /quit  ", Command("/quit", "")),
    ("/new please", Command("/new", "please")),
    ("/stat", Unknown("/stat")),
    ("/sessions", Command("/sessions", "")),
    ("//help", Message("/help")),
    ("/etc/passwd is a file", Message("/etc/passwd is a file")),
    ("/ alone", Message("/ alone")),
    ("/help\nand more", Message("/help\nand more")),  # a paste that starts with a command
    ("one\ntwo\nthree\n", Message("one\ntwo\nthree")),  # a paste ending in a newline
    ('"""\na\n  b\n"""', Message("a\n  b")),
    ('"""\n"""', None),
    ('"""not a block"""', Message('"""not a block"""')),
]


@pytest.mark.parametrize(("text", "meaning"), CASES)
def test_a_typed_text_is_a_message_a_command_or_an_unknown_word(text: str, meaning: object) -> None:
    assert interpret(text) == meaning


def test_a_block_is_open_until_its_closing_line() -> None:
    assert block_open('"""')
    assert block_open('"""\nsome text')
    assert not block_open('"""\nsome text\n"""')
    assert not block_open("plain")


def test_piped_lines_become_texts_with_blocks_gathered() -> None:
    reader = BlockReader()
    fed = [reader.feed(line) for line in ["a", '"""', "b", "", "c", '"""', "d", '"""', "e"]]
    assert fed == ["a", None, None, None, None, '"""\nb\n\nc\n"""', "d", None, None]
    assert reader.pending() == '"""\ne'  # cut off by the end of the input
    assert interpret('"""\ne') == Message("e")
    assert reader.pending() is None


def test_every_error_code_has_its_own_exit_code_apart_from_bxctls_own() -> None:
    own = [EXIT_OTHER, EXIT_USAGE, EXIT_NO_LOOPD, EXIT_CONNECTION_LOST, EXIT_TOO_LONG,
           EXIT_CANCELLED]  # fmt: skip
    assert set(EXIT_CODES) == set(p.ErrorCode)
    codes = [*EXIT_CODES.values(), *own]
    assert len(set(codes)) == len(codes)
    assert 0 not in codes
    assert all(0 < code < 256 for code in codes)


def test_help_lists_every_command() -> None:
    text = help_text()
    for name in COMMANDS:
        assert f"  {name} " in text


def test_stats_say_the_tokens_the_cache_and_the_seconds() -> None:
    usage = p.Usage(cache_n=790, prompt_n=22, predicted_n=45, reasoning_tokens=12,
                    thinking_capped=False)  # fmt: skip
    assert stats_text(TurnFigures(usage, 3.24, 1.06, 0)) == (
        "last turn: 3.2 s; the answer began after 1.1 s\n"
        "  prompt: 812 tokens, 790 reused from the cache (97%), 22 processed\n"
        "  answer: 45 tokens (12 of them reasoning)"
    )
    capped = p.Usage(0, 5, 1, 1, True)
    assert stats_text(TurnFigures(capped, 0.5, None, 2)) == (
        "last turn: 0.5 s\n"
        "  prompt: 5 tokens, 0 reused from the cache (0%), 5 processed\n"
        "  answer: 1 token (1 of them reasoning); thinking was capped\n"
        "  2 tool calls; the token figures are the turn's last completion's"
    )
    assert stats_text(None) == "no turn yet in this chat"
