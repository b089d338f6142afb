"""A turn's answer in its room, as it streams: the first content posts a message, edited as
the answer grows (at most once per `edit_interval_s`), and a last time whole when the turn
ends; a long answer goes on in further messages (`answers.split_answer`); typing notices
while it runs; each tool call a line of its own.

Each `Showing` has a task of its own that posts, so the watch that feeds it never waits on
the homeserver (loopd drops a watch that reads nothing for 30 s). Every post is keyed from
what the answer answers (`answers.key_of`), so the same answer posted again after a crash,
or by two paths at once (the watch and a `duplicate`), is one message.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial

import trio

from .answers import fitted_html, split_answer
from .matrix import Refused, Unreachable
from .port import Network
from .retry import patiently
from .words import answer_text

__all__ = ["Showing"]

log = logging.getLogger("gatewayd")

TYPING_EVERY_S = 20.0  # a typing notice lasts 30 s


class Showing:
    """One turn's answer: `room`, the message it replies to (`reply_to`, or None for a turn
    the owner's message did not start), and `key`, from which each post's key derives."""

    def __init__(
        self, network: Network, room: str, key: str, reply_to: str | None, interval: float,
        late: bool = False,
    ) -> None:  # fmt: skip
        self.network = network
        self.room = room
        self.key = key
        self.reply_to = reply_to
        self.interval = interval
        self.late = late  # heard from the middle: the text so far is not known, shown at the end
        self.text = ""
        self.done = False
        self.ending: str | None = None  # a notice after the answer (an error, a stop)
        self.tools: list[str] = []
        self._ids: list[str] = []
        self._sent: list[str] = []
        self._tools_posted = 0
        self._edits = 0
        self._changed = trio.Event()
        self.finished = trio.Event()

    def add(self, text: str) -> None:
        self.text += answer_text(text)
        self._poke()

    def tool(self, line: str) -> None:
        self.tools.append(line)
        self._poke()

    def end(self, text: str | None, ending: str | None = None) -> None:
        """The turn ended: `text` is its whole answer (None: what streamed is all there is)."""
        if text is not None:
            self.text = answer_text(text)
        self.ending = ending
        self.done = True
        self._poke()

    def _poke(self) -> None:
        self._changed.set()

    async def run(self, then: Callable[[], Awaitable[None]]) -> None:
        """Post until the turn is shown whole, then `then()` (its pending entries go)."""
        try:
            async with trio.open_nursery() as nursery:
                if not self.done:
                    nursery.start_soon(self._typing)
                await self._post()
                nursery.cancel_scope.cancel()
        except Refused as error:  # the room will not take it (the gateway was put out)
            log.warning("an answer in %s was refused: %s", self.room, error)
        with trio.move_on_after(10), contextlib.suppress(Refused, Unreachable):
            await patiently(lambda: self.network.typing(self.room, False), "typing", tries=2)
        await then()
        self.finished.set()

    async def _post(self) -> None:
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            done = self.done
            await self._tools()
            if done or not self.late:
                await self._show(final=done)
            if done:
                return
            await trio.sleep(self.interval)  # at most one edit per interval

    async def _typing(self) -> None:
        while True:
            try:
                await self.network.typing(self.room, True)
            except (Unreachable, Refused) as error:
                log.info("typing in %s: %s", self.room, error)
            await trio.sleep(TYPING_EVERY_S)

    async def _tools(self) -> None:
        while self._tools_posted < len(self.tools):
            n = self._tools_posted
            line = self.tools[n]
            post = partial(self.network.post, self.room, line, key=f"{self.key}-t{n}", notice=True)
            await patiently(post, "a tool's line")
            self._tools_posted += 1

    async def _show(self, final: bool) -> None:
        parts = split_answer(self.text) if self.text or final else []
        if final and not self.text:
            parts = [] if self.ending is not None else ["(no answer)"]
        for i, part in enumerate(parts):
            html = fitted_html(part)
            if i >= len(self._ids):
                reply = self.reply_to if i == 0 else None
                post = partial(
                    self.network.post, self.room, part, key=f"{self.key}-p{i}", html=html,
                    reply_to=reply,
                )  # fmt: skip
                event_id = await patiently(post, "an answer")
                self._ids.append(event_id)
                self._sent.append(part)
                if not final:
                    continue
            if final or part != self._sent[i]:
                self._edits += 1
                edit_key = f"{self.key}-p{i}-" + ("final" if final else f"e{self._edits}")
                target = self._ids[i]
                edit = partial(self.network.edit, self.room, target, part, key=edit_key, html=html)
                await patiently(edit, "an edit")
                self._sent[i] = part
        if final and self.ending is not None:
            ending = self.ending
            reply = self.reply_to
            await patiently(
                lambda: self.network.post(
                    self.room, ending, key=f"{self.key}-end", reply_to=reply, notice=True
                ),
                "a turn's end",
            )
