"""A watch's frames to the turns they show (`gatewayd.watching.Turns`): each turn a Showing,
its content added, a soft break's message joined to it, its end; a turn with no origin that a
watch loses sight of is ended there (no later watch could find it)."""

from __future__ import annotations

from typing import Any

import trio

from boxmaker import proto as p
from boxmaker.gatewayd.showing import Showing
from boxmaker.gatewayd.watching import LOST_SIGHT, Turns

S = p.SessionId("mx-1")
ROOM = "!r:hs"


class Desk:
    """What Turns asks of the desk, noted."""

    def __init__(self) -> None:
        self.showings: dict[str, Showing] = {}
        self.joins: list[tuple[str, str]] = []
        self.state = self

    def room_of(self, session: str) -> str | None:
        return ROOM if session == str(S) else None

    def showing_for(self, room: str, origin: p.Origin | None, *, late: bool) -> Showing:
        key = origin.id if origin is not None else f"anon{len(self.showings)}"
        self.showings.setdefault(key, Showing(None, room, key, None, 1.0, late=late))  # type: ignore[arg-type]
        return self.showings[key]

    def joined(self, event_id: str, key: str) -> None:
        self.joins.append((event_id, key))

    def ask_owner(self, room: str, needed: Any) -> None:
        raise AssertionError(needed)


def event(
    frame: Any, origin: p.Origin | None = None, session: p.SessionId = S
) -> p.WatchEventFrame:
    return p.WatchEventFrame(session, origin, frame)


def turn(content: str, origin: p.Origin | None) -> p.TurnFrame:
    return p.TurnFrame(S, content, resume=True, origin=origin)


def test_a_turn_its_soft_break_and_its_end() -> None:
    desk = Desk()
    turns = Turns(desk)  # type: ignore[arg-type]
    first, second = p.Origin("matrix", "$1"), p.Origin("matrix", "$2")
    turns.take(event(turn("Hi", first), first))
    turns.take(event(p.TurnEventFrame(p.Content("Hel")), first))
    turns.take(event(turn("And more", second), second))
    turns.take(event(p.TurnEventFrame(p.Content("lo")), first))
    turns.take(event(p.TurnDonePartFrame("Hello, "), first))
    turns.take(event(p.TurnDoneFrame("all.", p.Usage(0, 0, 0, 0, False)), first))
    showing = desk.showings["$1"]
    assert showing.done
    assert showing.text == "Hello, all."
    assert desk.joins == [("$2", "$1")]
    assert "$2" not in desk.showings
    turns.take(event(turn("Hi", None), None, p.SessionId("elsewhere")))  # not a room's: ignored
    assert list(desk.showings) == ["$1"]


def test_a_turn_heard_from_its_middle_and_one_lost_sight_of() -> None:
    desk = Desk()
    turns = Turns(desk)  # type: ignore[arg-type]
    schedule = p.Origin("schedule", "s1@2026-12-07T06:00:00.000000Z")
    turns.take(event(p.TurnEventFrame(p.Content("...middle")), schedule))
    assert desk.showings[schedule.id].late
    turns.take(event(p.WireError(p.ErrorCode.STOPPED, "stopped"), schedule))
    assert desk.showings[schedule.id].ending == "Stopped."
    turns.take(event(turn("From a terminal", None)))
    turns.take(event(p.TurnEventFrame(p.Content("Part")), None))
    turns.close()
    (anonymous,) = [s for key, s in desk.showings.items() if key.startswith("anon")]
    assert anonymous.done
    assert anonymous.ending == LOST_SIGHT
    assert anonymous.text == "Part"


class Typing:
    """A network that notes typing notices and posts."""

    def __init__(self) -> None:
        self.said: list[str] = []

    async def typing(self, room: str, on: bool) -> None:
        self.said.append(f"typing {on}")

    async def post(self, room: str, text: str, **_: Any) -> str:
        self.said.append(f"post {text}")
        return f"$p{len(self.said)}"

    async def edit(self, room: str, target: str, text: str, **_: Any) -> None:
        self.said.append(f"edit {text}")


async def test_typing_while_the_turn_runs_and_not_after(autojump_clock: Any) -> None:
    network = Typing()
    showing = Showing(network, ROOM, "k", "$asked", 1.0)  # type: ignore[arg-type]
    finished = trio.Event()

    async def then() -> None:
        finished.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(showing.run, then)
        showing.add("Hel")
        await trio.sleep(45)  # past one refresh of the notice (every 20 s)
        showing.end("Hello.")
        with trio.fail_after(10):
            await finished.wait()
    assert network.said.count("typing True") == 3  # at the start, then every 20 s
    assert "post Hel" in network.said
    assert network.said[-2:] == ["edit Hello.", "typing False"]  # the last edit, then no more
