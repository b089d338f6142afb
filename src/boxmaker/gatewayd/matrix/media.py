"""A file or an image someone sent in a room (`m.file`, `m.image`), as the gateway's port hears
it (`port.Sent`), and where its bytes are fetched. Pure.

The one idea to know: every part of such an event is the sender's to choose, so each is
checked before anything is asked for it. Its `url` must be an `mxc://<server-name>/<media-id>`
URI exactly as the spec draws it (a host name, an IPv4 address or a bracketed IPv6 one, an
optional port; a media id of letters, digits, `_` and `-`), or nothing is fetched; the bytes
are then asked of the gateway's own homeserver only, each part quoted into the path. An
encrypted file (`file` in place of `url`) is one the gateway cannot read. The name is cut to a
base name a `FileOffer` takes; the declared size and media type are claims, read only when
they have the right shape (loopd checks the bytes against the type).

A caption (Matrix 1.10): when `filename` is given and `body` differs from it, `body` is words
sent with the file; otherwise `body` is the file's name.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

from ..port import Sent, Unreadable

__all__ = ["FILES", "MOST_ID", "download_paths", "mxc_parts", "sent_of", "usable_name"]

FILES = ("m.file", "m.image")
MOST_ID = 255  # characters of a media id (Synapse's are 24)
MOST_NAME = 255  # characters of a file's name (a FileOffer's most)
# A host name or IPv4 address (starting with a letter or digit, so never `.` or `..`, which a
# URL would read as a path step), or an IPv6 address in brackets; then an optional port.
_HOST = r"[A-Za-z0-9][A-Za-z0-9.-]{0,254}|\[[0-9A-Fa-f:.]{2,45}\]"
_MXC = re.compile(rf"mxc://({_HOST})(?::([0-9]{{1,5}}))?/([A-Za-z0-9_-]{{1,{MOST_ID}}})")
_UNNAMED = {"m.file": "file", "m.image": "image"}


def mxc_parts(uri: str) -> tuple[str, str] | None:
    """The server name (with its port, if any) and the media id of an `mxc://` URI, or None
    when it is not one exactly (a port over 65535 too)."""
    match = _MXC.fullmatch(uri)
    if match is None:
        return None
    host, port, media = match.groups()
    if port is not None and int(port) > 65535:
        return None
    return (host if port is None else f"{host}:{port}"), media


def download_paths(uri: str) -> tuple[str, str] | None:
    """The paths that fetch the media `uri` names: the authenticated API's (Matrix 1.11) and
    the old unauthenticated one's; None when `uri` is not an `mxc://` URI."""
    parts = mxc_parts(uri)
    if parts is None:
        return None
    server, media = (quote(part, safe="") for part in parts)
    return (
        f"/_matrix/client/v1/media/download/{server}/{media}",
        f"/_matrix/media/v3/download/{server}/{media}",
    )


def usable_name(raw: str, fallback: str) -> str:
    """`raw` as a file's base name: what follows its last `/` or `\\`, each control
    character a `_`, spaces at its ends dropped, at most `MOST_NAME` characters; `fallback`
    when nothing is left."""
    base = raw.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = "".join("_" if ord(ch) < 32 or ord(ch) == 127 else ch for ch in base).strip()
    return cleaned[:MOST_NAME] or fallback


def sent_of(
    room: str, sender: str, event_id: str, content: dict[str, Any], at: int
) -> Sent | Unreadable:
    """What an `m.file` or `m.image` message's `content` is: the file, or why it cannot be
    taken."""
    msgtype = str(content.get("msgtype"))
    url, body, filename = content.get("url"), content.get("body"), content.get("filename")
    if url is None and isinstance(content.get("file"), dict):
        return Unreadable(room, sender, event_id, "an encrypted file, which it cannot decrypt")
    if not isinstance(url, str) or mxc_parts(url) is None:
        return Unreadable(room, sender, event_id, "a file whose address is not an mxc:// URI")
    body = body if isinstance(body, str) else ""
    caption = None
    if isinstance(filename, str) and filename and filename != body:
        name, caption = filename, (body if body.strip() else None)
    else:
        name = body
    info = content.get("info")
    info = info if isinstance(info, dict) else {}
    size, media_type = info.get("size"), info.get("mimetype")
    return Sent(
        room, sender, event_id, url, usable_name(name, _UNNAMED[msgtype]),
        caption=caption,
        media_type=media_type if isinstance(media_type, str) and media_type else None,
        size=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
        at=at,
    )  # fmt: skip
