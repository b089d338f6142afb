"""Files in a turn (SPEC section 22): the frames that bring a file's bytes to loopd, what a
turn frame names of each, what the `user` record keeps, and an image as a message carries it.

A file comes before its turn, on a connection of its own: an `attach` frame says what it is
(its name, media type, size and SHA-256), then its bytes follow in `file_piece` frames of at
most `PIECE_BYTES` each (base64), in order, and loopd answers one final frame: `attached`
once every byte came and matched the hash, or an error (`file_refused`). Nothing of a file
that did not come whole is kept. The `turn` frame then names its files (`FileOffer`) by
their hashes; loopd never opens a path taken from a frame.
"""

from __future__ import annotations

import re

from attrs import field, frozen

from ._ids import InvalidValue

__all__ = [
    "PIECE_BYTES",
    "AttachFrame",
    "AttachedFrame",
    "FileOffer",
    "FilePieceFrame",
    "ImagePart",
    "TurnFile",
]

_OMIT = {"omit_if_default": True}
PIECE_BYTES = 512 * 1024  # of a file, in one `file_piece` (its base64 fits a frame)
MOST_NAME = 255  # characters of a file's name
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}")


def _sha256(_instance: object, attribute: object, value: str) -> None:
    if not _SHA256.fullmatch(value):
        raise InvalidValue("must be 64 lowercase hexadecimal digits (a SHA-256)", "sha256")


def _text_sha256(_instance: object, attribute: object, value: str | None) -> None:
    if value is not None:
        _sha256(_instance, attribute, value)


def _name(_instance: object, _attribute: object, value: str) -> None:
    if not value or len(value) > MOST_NAME or any(c in value for c in "/\0\n\r"):
        raise InvalidValue(
            f"a file's name is 1 to {MOST_NAME} characters without '/', newlines or NUL", "name"
        )


def _media_type(_instance: object, _attribute: object, value: str) -> None:
    if not _MEDIA_TYPE.fullmatch(value):
        raise InvalidValue("must be a media type such as text/plain (lowercase)", "media_type")


def _size(_instance: object, _attribute: object, value: int) -> None:
    if value < 0:
        raise InvalidValue("must be at least 0", "size")


@frozen
class FileOffer:
    """A file as a channel names it: its name (a base name, no folder), media type, size in
    bytes and the SHA-256 of its bytes (hex)."""

    name: str = field(validator=_name)
    media_type: str = field(validator=_media_type)
    size: int = field(validator=_size)
    sha256: str = field(validator=_sha256)


@frozen
class AttachFrame:
    """To loopd: the file `offer` describes comes next, in `file_piece` frames."""

    offer: FileOffer


@frozen
class FilePieceFrame:
    """The next at most `PIECE_BYTES` bytes of the file being attached, in base64."""

    data: str


@frozen
class AttachedFrame:
    """loopd kept the file for a turn: what it is (`text`, `pdf` or `image`) and, for a PDF,
    how many characters of text were taken out of it."""

    sha256: str
    kind: str
    chars: int = field(default=0, metadata=_OMIT)


@frozen
class TurnFile:
    """A file of a turn as its `user` record names it: kept as the session's
    `files/<sha256>`. `text`: the SHA-256 of the text the model was given for it in place of
    its bytes (a PDF's text, an image as a vision server described it), kept as
    `files/<text>`; None for a text file (its bytes are its text) and an image sent as one."""

    name: str = field(validator=_name)
    media_type: str = field(validator=_media_type)
    size: int = field(validator=_size)
    sha256: str = field(validator=_sha256)
    text: str | None = field(default=None, metadata=_OMIT, validator=_text_sha256)


@frozen
class ImagePart:
    """An image of a user message, as the session keeps it (`files/<sha256>`); `data` is its
    base64, filled in only for the request that carries it (never kept, never compared)."""

    media_type: str
    sha256: str
    data: str = field(default="", eq=False, repr=False)
