"""An answer in parts that each fit one event (`gatewayd.answers`), and the owner's words
shown with nothing hidden in them (`gatewayd.words`)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from boxmaker.gatewayd.answers import EDIT_BYTES, PART_JSON, fitted_html, key_of, split_answer
from boxmaker.gatewayd.matrix import edit_body
from boxmaker.gatewayd.words import answer_in, question, tool_line, visible
from boxmaker.proto import Answer, ApprovalNeeded


@settings(max_examples=60)
@given(st.text(min_size=0, max_size=3000), st.integers(min_value=40, max_value=2000))
def test_the_parts_make_the_answer_and_each_fits(text: str, limit: int) -> None:
    parts = split_answer(text, limit)
    assert "".join(parts) == text
    assert all(len(json.dumps(part, ensure_ascii=False).encode()) <= limit for part in parts)
    assert all(parts) or parts == [""]


def test_a_cut_falls_at_a_line_s_end_when_one_is_near() -> None:
    text = "".join(f"line {n:04d}\n" for n in range(3000))
    parts = split_answer(text)
    assert len(parts) >= 3
    assert all(part.endswith("\n") for part in parts)


def test_an_edit_of_any_part_fits_one_event() -> None:
    for text in ("\x00" * 40_000, "| a | b |\n|---|---|\n" + "| x | y |\n" * 5000, "é" * 40_000):
        for part in split_answer(text):
            body = edit_body("$e", part, fitted_html(part))
            assert len(json.dumps(body, ensure_ascii=False).encode()) <= EDIT_BYTES
    assert PART_JSON * 4 < EDIT_BYTES


def test_keys_are_stable_and_distinct() -> None:
    assert key_of("answer", "$1") == key_of("answer", "$1")
    assert key_of("answer", "$1") != key_of("answer", "$2")
    assert key_of("a", "b$c") != key_of("ab", "$c")


def test_nothing_is_hidden_in_what_the_owner_is_shown() -> None:
    assert visible("ok\x1b[31m\u202eevil") == "ok\\u001b[31m\\u202eevil"
    assert visible("x" * 400, 300).endswith("… [100 more characters]")
    assert tool_line("read\x07file") == "⚙ read\\u0007file"
    assert tool_line("shell", "rm -rf \u202e~") == "⚙ shell — rm -rf \\u202e~"
    asked = question(
        ApprovalNeeded(
            "a-1", "write_file", "write_file a.txt\x1b]0;", "path: a.txt\ncontent: ```\x1b[2J"
        )
    )
    assert "\x1b" not in asked
    assert asked.count("```") == 2  # the detail cannot close its block early
    assert "\\u001b[2J" in asked
    assert "`s` (this conversation), `a` (always)" in asked
    diff = "path: a.md\nchange (a unified diff):\n  --- a/a.md\n  +++ b/a.md\n  -old\n  +new"
    once = question(ApprovalNeeded("a-2", "write_file", "write_file a.md", diff, only_once=True))
    assert "  -old\n  +new" in once  # the change the owner approves, in the question
    assert "Reply `y` (once) or `n` (no)" in once  # the ask mode offers no grant
    assert "`s`" not in once


def test_the_owner_s_answers() -> None:
    assert answer_in(" Y ") is Answer.ONCE
    assert answer_in("yes.") is Answer.ONCE
    assert answer_in("s") is Answer.SESSION
    assert answer_in("always") is Answer.ALWAYS
    assert answer_in("👍🏽") is Answer.ONCE
    assert answer_in("❌") is Answer.DENY
    assert answer_in("no!") is Answer.DENY
    assert answer_in("maybe") is None
