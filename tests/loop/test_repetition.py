"""An answer that starts repeating itself is seen as it streams, the same for any split of its
text, and what a person may ask to be repeated (a table, code, a list, short sentences) is
never taken for it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.loopd.loop.repetition import LONGEST, TIMES, RepetitionWatch

from ..infer.test_sse import splits

LOOP = "I am your creator. You are my creation. " * 5


def fed(text: str, cuts: list[int] | None = None) -> tuple[int | None, str | None]:
    """Where in `text` the watch said so (the end of the piece it said it with), and what."""
    watch = RepetitionWatch()
    at = 0
    for piece in splits(text.encode(), cuts or []) if cuts is not None else [text.encode()]:
        chunk = piece.decode()
        at += len(chunk)
        if watch.feed(chunk):
            return at, watch.repeated
    return None, None


def test_a_sentence_said_a_third_time_is_degenerate() -> None:
    at, sentence = fed(LOOP, list(range(0, len(LOOP), 5)))
    assert sentence == "I am your creator."
    assert at is not None
    assert at < len("I am your creator. You are my creation. ") * 3
    line = "Your tool block was not run: the block is not JSON.\n" * 3
    assert fed(line)[1] == "Your tool block was not run: the block is not JSON."


@given(st.lists(st.integers(0, len(LOOP)), max_size=12))
def test_any_split_sees_the_same_sentence(cuts: list[int]) -> None:
    watch = RepetitionWatch()
    for piece in splits(LOOP.encode(), cuts):
        watch.feed(piece.decode())
    assert watch.repeated == "I am your creator."


@pytest.mark.parametrize(
    "asked",
    [
        "| name | age |\n|---|---|\n| the same row here | 1 |\n"
        + "| the same row here | 1 |\n" * 3,
        "```\nprint('the same line of code')\n" * 4 + "```\n",
        "- the same item of the list\n" * 4,
        "1. The same numbered item.\n2. The same numbered item.\n3. The same numbered item.\n",
        "I love you. " * 6,
        "Paris is the capital of France. It is known for the Louvre and the Eiffel Tower.",
    ],
)
def test_what_a_person_may_ask_to_repeat_is_not_degenerate(asked: str) -> None:
    assert fed(asked, list(range(0, len(asked), 3))) == (None, None)


@pytest.mark.parametrize("tail", [" ", ". "])
def test_the_watch_holds_a_bounded_line_however_long_the_answer(tail: str) -> None:
    """A 20,000-token answer on one line (the throughput row's) costs each piece the same: the
    watch keeps of the line its start and what it has not counted, never the whole."""
    watch = RepetitionWatch()
    for number in range(20_000):
        assert not watch.feed(f"token{number}{tail}")
        assert len(watch._line) <= LONGEST + 64
    for _ in range(TIMES + 1):  # and after it a loop is still seen (its first joins the line)
        watch.feed("I am your creator and you are mine. ")
    assert watch.repeated == "I am your creator and you are mine."


def test_a_long_list_item_stays_a_list_item() -> None:
    text = "- " + "".join(f"item {n} is here. " for n in range(500)) + LOOP
    assert fed(text, list(range(0, len(text), 7))) == (None, None)
