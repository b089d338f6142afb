"""The calls that wait for the owner's answer, and the wait (SPEC section 14, "Approval").

brokerd answers a call under `ask` with `pending_approval {id, summary}`. The turn tells its
channel (`approval_needed`) and waits, at most `[tools] approval_timeout_s`, in the daemon's
`Approvals`, where an `approval` frame from any channel of the owner's (a new connection to
`loop.sock`: `bxctl chat`'s question, `bxctl approvals`) finds it by id. Nothing the model
writes reaches here: only a frame on the owner's socket answers. A turn whose channel cannot
ask is denied at once; a wait past the timeout is a denial. The answer goes to brokerd, which
runs the call or refuses it, and the log keeps it (`approval`).
"""

from __future__ import annotations

import trio
from attrs import define, field

from ...proto import Answer, SessionId, WaitingApproval

__all__ = ["MOST_WAITING", "TOO_MANY", "Approvals"]

MOST_WAITING = 256  # calls waiting at once, in all sessions (each turn holds at most one)
SHOWN_WHOLE = 256 * 1024  # characters of summaries and details one `waiting` frame holds whole
TOO_MANY = "[not shown: too many calls wait to list them all whole; answer some, then list again]"


@define
class _Waiting:
    session: SessionId
    tool: str
    summary: str
    since: float
    detail: str = ""
    only_once: bool = False
    answered: trio.Event = field(factory=trio.Event)
    answer: Answer | None = None


class Approvals:
    """The calls waiting for the owner, by id."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}

    async def wait(
        self,
        session: SessionId,
        id: str,
        tool: str,
        summary: str,
        timeout: float,
        detail: str = "",
        only_once: bool = False,
    ) -> Answer | None:
        """The owner's answer to the call waiting as `id`, or None after `timeout`."""
        if id in self._waiting or len(self._waiting) >= MOST_WAITING:
            return None  # brokerd's ids are random; a clash or a flood is denied
        waiting = _Waiting(session, tool, summary, trio.current_time(), detail, only_once)
        self._waiting[id] = waiting
        try:
            with trio.move_on_after(timeout):
                await waiting.answered.wait()
            return waiting.answer
        finally:
            del self._waiting[id]

    def answer(self, id: str, answer: Answer) -> bool:
        """Give the waiting call `id` its answer; False when none waits so (any more)."""
        waiting = self._waiting.get(id)
        if waiting is None or waiting.answer is not None:
            return False
        waiting.answer = answer
        waiting.answered.set()
        return True

    def waiting(self) -> tuple[WaitingApproval, ...]:
        """What waits, each with its summary and detail while `SHOWN_WHOLE` characters hold
        them (a frame holds 1 MiB); after that, a summary cut and a detail saying why."""
        now = trio.current_time()
        listed, room = [], SHOWN_WHOLE
        for id, w in self._waiting.items():
            if w.answer is not None:
                continue
            summary, detail = w.summary, w.detail
            room -= len(summary) + len(detail)
            if room < 0:
                summary, detail = summary[:200], TOO_MANY
            listed.append(
                WaitingApproval(
                    id, w.session, w.tool, summary, round(now - w.since, 1), detail, w.only_once
                )
            )
        return tuple(listed)
