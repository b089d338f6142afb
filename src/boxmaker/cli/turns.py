"""The chat's turns: one (`--say`), or one per message typed or piped (`interactive`), with
the commands bxctl answers itself and Ctrl-C cancelling the turn that runs."""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Mapping

import trio

from ..proto import SessionId
from .chat import Chat, Reader, Steer
from .commands import ACTS, Command, Message, Unknown, help_text, interpret, stats_text
from .watch import Others

__all__ = ["interactive", "say"]


async def say(chat: Chat, text: str) -> int:
    """One turn; its exit code. Ctrl-C cancels it (exit 130)."""
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:
            code: list[int] = []

            async def run() -> None:
                code.append(await chat.turn(text))
                nursery.cancel_scope.cancel()

            nursery.start_soon(run)
            async for _ in interrupts:
                nursery.cancel_scope.cancel()
                break
    return code[0] if code else chat.cancelled()


async def interactive(
    chat: Chat,
    reader: Reader,
    new_session: Callable[[], SessionId],
    listing: Callable[[], str] = lambda: "",
    steer: Steer | None = None,
    views: Mapping[str, Callable[[], str]] | None = None,
    others: Others | None = None,
    fork: Callable[[SessionId, str], SessionId | str] | None = None,
    acts: Callable[[Chat, str, str], Awaitable[int]] | None = None,
) -> int:
    """Turns until the input ends or `/quit`; the exit code of the first turn that failed.
    `listing` gives what `/sessions` shows, `views` what `/memory` and `/schedules` show;
    with `steer` (a person at a terminal), what is typed while a turn runs steers it; with
    `others`, the turns other channels start in the session are shown as they run; with
    `fork`, `/fork [TURN]` goes on in a fork of the session (or `fork` says why not); with
    `acts`, `/undo`, `/rewind`, `/mode` and `/plan` are the owner's acts on the session
    (`undo_command.chat_act`: a failed plan turn's code counts as a turn's)."""
    first_failure = 0
    carry = ""  # typed in the steering line when its turn ended: the next prompt shows it
    turn_scope: list[trio.CancelScope] = []
    with trio.open_signal_receiver(signal.SIGINT) as interrupts:
        async with trio.open_nursery() as nursery:

            async def on_interrupt() -> None:
                async for _ in interrupts:
                    if turn_scope:
                        turn_scope[-1].cancel()  # Ctrl-C in a turn: cancel it
                    elif not reader.interrupt():  # SIGINT at the prompt: leave
                        nursery.cancel_scope.cancel()

            nursery.start_soon(on_interrupt)
            if others is not None:
                nursery.start_soon(others.run)
            while True:
                text = await trio.to_thread.run_sync(reader.read, carry, abandon_on_cancel=True)
                carry = ""
                if text is None:
                    break
                match interpret(text):
                    case Command(name="/quit"):
                        break
                    case Command(name="/help"):
                        chat.note(help_text())
                    case Command(name="/stats"):
                        chat.note(stats_text(chat.figures))
                    case Command(name="/sessions"):
                        chat.note(listing())
                    case Command(name=name) if views and name in views:
                        chat.note(views[name]())
                    case Command(name="/new-epoch"):
                        chat.new_epoch = True
                        chat.note(
                            "[the next message opens a new epoch: a summary of this one "
                            "and its newest turns carry on]"
                        )
                    case Command(name="/fork", rest=rest) if fork is not None:
                        made = fork(chat.session, rest)
                        if isinstance(made, str):
                            chat.note(made)
                            continue
                        chat.session, chat.resume, chat.figures = made, True, None
                        chat.announce()
                        if others is not None:
                            others.restart()
                    case Command(name=name, rest=rest) if acts is not None and name in ACTS:
                        first_failure = first_failure or await acts(chat, name, rest)
                    case Command(name="/new"):
                        chat.session, chat.resume, chat.figures = new_session(), False, None
                        chat.announce()
                        if others is not None:
                            others.restart()
                    case Unknown(word=word):
                        chat.note(f"{word} is not a command: /help lists them (// sends a /)")
                    case Message(text=message):
                        with trio.CancelScope() as scope:
                            turn_scope.append(scope)
                            try:
                                if steer is None:
                                    code = await chat.turn(message)
                                else:
                                    code, carry = await steer(chat, message, scope.cancel)
                            finally:
                                turn_scope.pop()
                        if scope.cancelled_caught:
                            code = chat.cancelled()
                        first_failure = first_failure or code
            nursery.cancel_scope.cancel()
    return first_failure
