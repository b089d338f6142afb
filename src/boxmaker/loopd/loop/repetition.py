"""An answer that starts repeating itself, seen as it streams, so the turn can stop it when the
repetition is certain rather than at `max_tokens`. Pure.

`RepetitionWatch.feed(text)` takes each piece of the answer's text and says whether it is now
degenerate: one sentence or line, of at least `MIN_CHARS` characters once its white space and
case are set aside, said `TIMES` times in the answer. What a person may ask to be repeated is
never judged: the text inside code fences, table rows (`|`), list items (`-`, `*`, `+`, `1.`),
and short sentences (`I love you.` three times is an answer). A small model in a loop says
the same long sentence again and again (`I am your creator. You are my creation.`), which
nothing a person asks for does three times.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["LONGEST", "MIN_CHARS", "TIMES", "RepetitionWatch"]

MIN_CHARS = 16
TIMES = 3
# A sentence longer than this is no loop's (a loop says a short one again and again): it is
# passed over, so the work per piece stays bounded however long a line runs.
LONGEST = 1000
_HEAD = 16  # what is kept of a line's start once its sentences are counted: enough to judge it

_FENCE = "```"
_LIST = re.compile(r"\s*(?:[-*+]|\d+[.)])\s")
_SENTENCE_END = re.compile(r"(?<![.!?])[.!?]++\s+")  # at a run's start, never backtracking


class RepetitionWatch:
    def __init__(self) -> None:
        self._line = ""  # the line being written
        self._counted = 0  # how much of it is sentences already counted
        self._clear = 0  # how much of the uncounted part is known to end no sentence
        self._in_code = False
        self._seen: dict[str, int] = {}
        self.repeated: str | None = None  # the sentence said `TIMES` times, once it is

    def reset(self) -> None:
        """A new attempt of the completion starts: forget the failed one."""
        self.__init__()  # type: ignore[misc]

    def feed(self, text: str) -> bool:
        """Take the next piece of the answer; whether it is now degenerate."""
        if self.repeated is None:
            self._line += text
            if "\n" in text:
                *whole, self._line = self._line.split("\n")
                for line in whole:
                    self._sentences(line, finished=True)
                    self._counted = self._clear = 0
            self._sentences(self._line, finished=False)
            self._bound()
        return self.repeated is not None

    def _bound(self) -> None:
        """Keep of the line being written only its start and what is not yet counted."""
        if len(self._line) - self._counted > LONGEST:
            self._counted = len(self._line)
            self._clear = 0
        if self._counted > 2 * _HEAD and len(self._line) > LONGEST:
            self._line = self._line[:_HEAD] + self._line[self._counted :]
            self._counted = _HEAD

    def _sentences(self, line: str, *, finished: bool) -> None:
        start = line.lstrip()
        if start.startswith(_FENCE):
            if finished:
                self._in_code = not self._in_code
            return
        if self._in_code or start.startswith("|") or _LIST.match(line):
            return
        rest = line[self._counted :]
        ends = [match.end() for match in _SENTENCE_END.finditer(rest, self._resume(rest))]
        cuts = [0, *ends, len(rest)] if finished else [0, *ends]
        for begin, end in itertools.pairwise(cuts):
            self._count(rest[begin:end])
        if not finished and ends:
            self._counted += ends[-1]
            self._clear = 0
        elif not finished:  # no end yet: only its trailing `.!?` may begin one
            self._clear = len(rest.rstrip(".!?"))

    def _resume(self, rest: str) -> int:
        """Where in `rest` a sentence's end may begin: past what an earlier piece's look found
        none in, so each character of a long line is looked at about once."""
        return self._clear

    def _count(self, sentence: str) -> None:
        key = " ".join(sentence.split()).casefold()
        if len(key) < MIN_CHARS or self.repeated is not None:
            return
        self._seen[key] = count = self._seen.get(key, 0) + 1
        if count >= TIMES:
            self.repeated = sentence.strip()
