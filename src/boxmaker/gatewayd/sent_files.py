"""The files the owner sends in a room (SPEC section 22), as the gateway holds them for a turn.
Pure.

What a person on a phone does: sends a photo, then types the question; or sends the photo with
the question as its caption. So a file with a caption is a message of its own (the caption its
words), and one without waits in its room (`state.Room.waiting`) for the next message there
that runs a turn, which takes every file that waits, in the order they came. A file waits at
most `WAIT_MS` by the homeserver's clock (its event's `origin_server_ts`): one older is dropped
when the next message comes, and the owner told, so a photo sent yesterday never rides along
with today's question. Each file is brought to loopd as it comes (`attaching`), so the owner
hears at once that it was taken, or why not; the turn names it by its hash.
"""

from __future__ import annotations

from attrs import frozen

from ..proto import FileOffer

__all__ = ["WAIT_MS", "SentFile", "taken_by"]

WAIT_MS = 3_600_000  # an hour: as long as loopd keeps an attached file for its turn


@frozen
class SentFile:
    """A file the owner sent as `event_id`, brought to loopd as `offer`; its bytes can be
    fetched again from `source` (when loopd has lost them: it restarted, say); `at`: when the
    homeserver took it (ms since the epoch, 0 when it did not say)."""

    event_id: str
    source: str
    offer: FileOffer
    at: int = 0


def taken_by(
    waiting: tuple[SentFile, ...], at: int
) -> tuple[tuple[SentFile, ...], tuple[SentFile, ...]]:
    """Of the files that wait in a room, those a message sent at `at` takes, and those that
    waited too long for it (dropped). With no time on either side, none is too old."""
    if not at:
        return waiting, ()
    fresh = tuple(f for f in waiting if not f.at or at - f.at <= WAIT_MS)
    return fresh, tuple(f for f in waiting if f not in fresh)
