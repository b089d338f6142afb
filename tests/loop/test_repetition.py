"""An answer that starts repeating itself is seen as it streams, the same for any split of its
text, and what a person may ask to be repeated (a table, code, a list, short sentences) is
never taken for it."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boxmaker.loopd.loop.repetition import _SENTENCE_END, LONGEST, TIMES, RepetitionWatch

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


class LookingAgain(RepetitionWatch):
    """The watch as it was: every piece looks at the whole uncounted part again."""

    def _resume(self, rest: str) -> int:
        return 0


def heard(watch: RepetitionWatch, pieces: list[str]) -> tuple[list[bool], dict[str, int]]:
    """What the watch said at each piece, and every sentence it counted, how often."""
    return [watch.feed(piece) for piece in pieces], watch._seen


@given(
    st.lists(
        st.sampled_from(["the same long sentence", "once more", ".", "!", "?", " ", "  ", "\n",
                         "- ", "```", "x" * 300]),
        max_size=60,
    ),
    st.lists(st.integers(0, 3000), max_size=40),
)  # fmt: skip
def test_a_piece_looks_only_at_what_is_new_and_counts_what_looking_again_would(
    words: list[str], cuts: list[int]
) -> None:
    text = "".join(words) * 3  # said again and again: some of it is degenerate
    evenly = [[text[i : i + n] for i in range(0, len(text), n)] for n in (1, 2, 3, 5, 7, 29)]
    for pieces in ([p.decode() for p in splits(text.encode(), cuts)], *evenly):
        assert heard(RepetitionWatch(), pieces) == heard(LookingAgain(), pieces)


def test_a_line_said_again_without_a_stop_is_degenerate_when_it_ends() -> None:
    line = "I am your creator and I made you\n"
    assert fed(line * 3) == (len(line) * 3, "I am your creator and I made you")


def test_past_a_line_too_long_to_keep_a_loop_is_still_seen_as_looking_again_sees_it() -> None:
    pieces = ["x" * (LONGEST + 100), *["The same long sentence here. "] * TIMES]
    assert heard(RepetitionWatch(), pieces) == heard(LookingAgain(), pieces)
    assert heard(RepetitionWatch(), pieces)[0][-1]


_BACKTRACKING = re.compile(r"[.!?]+\s+")  # the sentence end as it was: a run of `.` was
# tried again at each of its characters, a piece's look quadratic in the run's length


@given(st.text(".!? \t\nab\u2028", max_size=60), st.integers(0, 60))
def test_a_sentence_end_is_found_where_the_backtracking_pattern_found_it(
    text: str, start: int
) -> None:
    start = min(start, len(text))
    while start and text[start - 1] in ".!?":  # the watch resumes at a run's start
        start -= 1
    new = [m.end() for m in _SENTENCE_END.finditer(text, start)]
    assert new == [m.end() for m in _BACKTRACKING.finditer(text, start)]
