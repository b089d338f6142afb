"""The fenced tool mode's text: tool blocks read out of an answer (every failure named for the
model), the part of the system message on tools, and the stream filter that keeps a block's
text off the screen however the answer is split."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.tools import CLOCK, ECHO
from boxmaker.tools.fenced import (
    MAX_BLOCK_BYTES,
    MAX_BLOCKS,
    MAX_DEPTH,
    FenceFilter,
    PhraseFilter,
    block_text,
    parse_blocks,
    problem_texts,
    tool_section,
)

from ..infer.test_sse import splits

OFFERED = ["clock", "echo"]


def test_a_block_is_a_call_numbered_within_its_answer() -> None:
    text = "Let me see.\n" + block_text("echo", {"text": "hi"}) + "\n" + block_text("clock", {})
    first, second = parse_blocks(text, OFFERED)
    assert (first.id, first.name, first.arguments, first.problem) == (
        "fenced-1", "echo", '{"text":"hi"}', None,
    )  # fmt: skip
    assert (second.id, second.name, second.arguments, second.problem) == (
        "fenced-2", "clock", "{}", None,
    )  # fmt: skip


def test_the_same_text_always_gives_the_same_calls() -> None:
    text = block_text("echo", {"text": "é ✓"}) + block_text("nope", {})
    assert parse_blocks(text, OFFERED) == parse_blocks(text, OFFERED)


def test_text_without_a_block_makes_no_call() -> None:
    assert parse_blocks("It is noon. ```python\nprint(1)\n```", OFFERED) == []
    assert parse_blocks(None, OFFERED) == []


@pytest.mark.parametrize(
    ("body", "name", "arguments"),
    [
        ('{"name": "Echo", "arguments": {"text": "a"}}', "echo", '{"text":"a"}'),  # its case
        ('{"name": "clock"}', "clock", "{}"),  # no arguments: none
        ('{"name": "echo", "arguments": "{\\"text\\": \\"a\\"}"}', "echo", '{"text":"a"}'),
        ('  {"name": "clock", "arguments": {}, "why": "time"}  ', "clock", "{}"),  # extra keys
    ],
)
def test_what_a_small_model_writes_loosely_still_runs(body: str, name: str, arguments: str) -> None:
    [call] = parse_blocks(f"```tool\n{body}\n```", OFFERED)
    assert (call.name, call.arguments, call.problem) == (name, arguments, None)


def test_a_block_the_model_did_not_close_reaches_the_end_of_the_answer() -> None:
    [call] = parse_blocks('```tool\n{"name": "clock", "arguments": {}}', OFFERED)
    assert (call.name, call.problem) == ("clock", None)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ('{"name": "echo", "arguments": {"text": "a"', "not valid JSON"),
        ('["echo"]', "not a JSON object"),
        ('{"arguments": {}}', "no tool name"),
        ('{"name": 5}', "no tool name"),
        ('{"name": "echo", "arguments": [1]}', "the arguments are not an object"),
        ('{"name": "time"}', "no such tool; the tools are clock, echo"),
        ("", "not valid JSON"),
    ],
)  # fmt: skip
def test_a_bad_block_is_a_call_whose_problem_the_model_is_told_briefly(
    body: str, problem: str
) -> None:
    [call] = parse_blocks(f"```tool\n{body}\n```", OFFERED)
    assert call.problem == f"(not run: {problem})"
    assert call.problem in problem_texts(OFFERED)  # each one known, so never shown


def test_an_oversized_block_is_refused_unread() -> None:
    body = json.dumps({"name": "echo", "arguments": {"text": "x" * MAX_BLOCK_BYTES}})
    [call] = parse_blocks(f"```tool\n{body}\n```", OFFERED)
    assert call.problem == "(not run: too long)"
    assert len(call.arguments) == MAX_BLOCK_BYTES  # what is kept of it is bounded too


def test_a_deeply_nested_block_is_refused_before_it_is_parsed() -> None:
    deep = '{"name": "echo", "arguments": {"text": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    [call] = parse_blocks(f"```tool\n{deep[: MAX_BLOCK_BYTES - 10]}\n```", OFFERED)
    assert call.problem is not None
    assert f"more than {MAX_DEPTH} deep" in call.problem
    ok = '{"name": "echo", "arguments": {"text": "a", "x": ' + "[" * 14 + "]" * 14 + "}}"
    [fine] = parse_blocks(f"```tool\n{ok}\n```", OFFERED)
    assert fine.problem is None  # 16 levels: allowed
    brackets_in_text = {"name": "echo", "arguments": {"text": "[" * 50}}
    [text] = parse_blocks(block_text("echo", brackets_in_text["arguments"]), OFFERED)
    assert text.problem is None  # brackets inside a string are text


def test_blocks_past_the_limit_are_not_run_and_the_model_is_told() -> None:
    text = block_text("clock", {}) * (MAX_BLOCKS + 5)
    calls = parse_blocks(text, OFFERED)
    assert len(calls) == MAX_BLOCKS + 1
    assert all(c.problem is None for c in calls[:MAX_BLOCKS])
    last = calls[-1]
    assert (
        last.problem
        == f"(not run: more than {MAX_BLOCKS} blocks; only the first {MAX_BLOCKS} were read)"
    )


def test_the_section_on_tools_says_how_to_call_each_and_how_results_come_back() -> None:
    section = tool_section((CLOCK, ECHO), "user", "Tool result:\n```\n")
    assert section.startswith("## Tools\n\nTo use a tool, answer with only a tool block")
    assert '```tool\n{"name": "clock", "arguments": {}}\n```' in section  # the example
    assert "- clock: The current date and time in UTC (RFC 3339)." in section
    assert "Arguments: none." in section
    assert "- echo: Returns its text argument unchanged." in section
    assert "Arguments: text (string, required): The text to return." in section
    assert section.endswith('a message that starts with "Tool result:". Then answer.')
    assert tool_section((ECHO,), "tool", "").endswith("as a tool message. Then answer.")
    assert '{"name": "echo", "arguments": {"text": "<text>"}}' in tool_section((ECHO,), "tool", "")


# --- the stream filter ------------------------------------------------------------------------


def shown(pieces: list[str]) -> str:
    fence = FenceFilter()
    return "".join(fence.feed(piece) for piece in pieces) + fence.flush()


def without_blocks(text: str) -> str:
    out, at = [], 0
    while (start := text.find("```tool", at)) >= 0:
        out.append(text[at:start])
        end = text.find("```", start + 7)
        at = len(text) if end < 0 else end + 3
    return "".join(out) + text[at:]


def test_a_block_is_not_shown_as_answer_text() -> None:
    text = "Let me check. " + block_text("clock", {}) + " Done."
    assert shown([text]) == "Let me check.  Done."


def test_not_even_the_first_backtick_of_a_block_shows() -> None:
    fence = FenceFilter()
    assert fence.feed("Sure `") == "Sure "  # held: it may open a block
    assert fence.feed("``to") == ""
    assert fence.feed('ol\n{"name": "clock"}\n``') == ""
    assert fence.feed("`after") == "after"
    assert fence.flush() == ""


def test_other_fences_and_backticks_show() -> None:
    text = "Use `ls` or:\n```python\nprint(1)\n```\nand ``` alone `"
    assert shown(list(text)) == text


def test_a_block_left_open_at_the_end_shows_nothing_of_it() -> None:
    assert shown(["Hi ", '```tool\n{"name": "clo']) == "Hi "


def test_a_new_attempt_forgets_what_the_failed_one_held() -> None:
    fence = FenceFilter()
    fence.feed("text ```tool\n{")
    fence.reset()
    assert fence.feed("fresh") == "fresh"


text_with_blocks = st.lists(
    st.one_of(
        st.text(st.sampled_from("ab `\n{}")),
        st.sampled_from(["```tool", "```", '{"name": "clock"}', "``", "`"]),
    ),
    max_size=12,
).map("".join)


@given(text_with_blocks, st.data())
def test_however_an_answer_is_split_the_screen_gets_its_text_less_its_blocks(
    text: str, data: st.DataObject
) -> None:
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=8)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    assert shown(pieces) == shown([text]) == shown(list(text)) == without_blocks(text)


# --- loopd's own words taken out of an answer as it streams ------------------------------

WORDS = ("Tool result:", "Answer the question now.")


@given(st.lists(st.integers(0, 80), max_size=8))
def test_loopd_s_words_are_taken_out_for_any_split(cuts: list[int]) -> None:
    text = "Tool result: noon. Answer the question now. It is noon; Tool res"
    words = PhraseFilter(WORDS)
    shown = "".join(words.feed(piece.decode()) for piece in splits(text.encode(), cuts))
    assert shown + words.flush() == " noon.  It is noon; Tool res"


def test_a_possible_start_of_loopd_s_words_is_held_until_it_is_known() -> None:
    words = PhraseFilter(WORDS)
    assert words.feed("It is Too") == "It is "
    assert words.feed("th") == "Tooth"
    assert words.feed(" Answer the") == " "
    assert words.feed(" question now.") == ""


def test_loopd_s_words_are_taken_out_in_any_case() -> None:
    words = PhraseFilter(WORDS)
    assert words.feed("tool RESULT: noon. answer the question NOW.") == " noon. "
    assert words.feed("İ stays") == "İ stays"  # a letter whose lower case is two keeps its place


def test_of_two_phrases_at_one_place_the_longer_is_taken_out() -> None:
    words = PhraseFilter(("(not run", "(not run: no more tools)"))
    assert words.feed("a (not run: no more tools) b") + words.flush() == "a  b"
