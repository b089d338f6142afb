"""Files for the chat's next message (SPEC section 22): `bxctl chat --attach PATH` and the
chat's `/attach PATH`. bxctl reads the file (the owner's own path: loopd never opens one
taken from a frame), guesses its media type from its bytes and its name, and brings its
bytes to loopd (`attach`); the next message names it, and loopd gives it to the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import trio

from ..attached import media_type_of
from ..client import ChannelError, attach, offer_of
from ..proto import MOST_FILES, AttachedFrame, FileOffer, InvalidValue, WireError
from .commands import EXIT_CODES, EXIT_NO_LOOPD, EXIT_OTHER, EXIT_USAGE

__all__ = ["MOST_READ", "Attaching", "attach_path"]


class Attaching(Protocol):
    """What attaching needs of `chat.Chat`: loopd's socket and the next message's files."""

    socket: Path
    files: list[FileOffer]


MOST_READ = 512 * 1024 * 1024  # bytes bxctl reads of a file; loopd's [files] max_bytes decides


async def attach_path(chat: Attaching, path: str) -> tuple[int, str]:
    """Attach the file at `path` to the chat's next message: 0 and what to say of it, or an
    exit code and why not (`file_refused`'s when loopd refused it)."""
    if not path.strip():
        return EXIT_USAGE, "/attach takes the path of a file (a text, a PDF or an image)"
    if len(chat.files) >= MOST_FILES:
        return EXIT_USAGE, f"the next message already carries {MOST_FILES} files"
    given, data = await trio.to_thread.run_sync(_read, path.strip())
    if isinstance(data, str):
        return EXIT_USAGE, f"cannot attach {given}: {data}"
    try:
        offer = offer_of(given.name, media_type_of(given.name, data), data)
    except InvalidValue as error:
        return EXIT_USAGE, f"cannot attach {given}: {error}"
    try:
        answer = await attach(chat.socket, offer, data)
    except ChannelError as error:
        return EXIT_NO_LOOPD, f"cannot attach {given}: {error}"
    if isinstance(answer, WireError):
        return EXIT_CODES.get(answer.code, EXIT_OTHER), f"not attached: {answer.message}"
    if not isinstance(answer, AttachedFrame):
        return EXIT_OTHER, f"not attached: loopd answered {type(answer).__name__}"
    chat.files.append(offer)
    text = f", {answer.chars:,} characters of text" if answer.chars else ""
    said = f"{offer.media_type}, {offer.size:,} bytes{text}"
    return 0, f"attached {given.name} ({said}): it goes with the next message"


def _read(given: str) -> tuple[Path, bytes | str]:
    """The file at `given` (`~` expanded): its path, and its bytes or why they cannot be
    read."""
    path = Path(given).expanduser()
    try:
        with open(path, "rb") as file:
            data = file.read(MOST_READ + 1)
    except OSError as error:
        return path, str(error.strerror or error)
    return path, data if len(data) <= MOST_READ else f"it is over {MOST_READ // 1024**2} MiB"
