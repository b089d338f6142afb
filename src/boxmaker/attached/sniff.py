"""What an attached file is: text, a PDF or an image, from its declared media type checked
against its bytes. Pure.

The one idea to know: a declared media type is a claim, and the bytes must bear it out before
anything is kept. A PDF starts with `%PDF-`, each image type with its signature, and text is
UTF-8 with no NUL byte; anything else is refused, in words (`FileRefused`). The types taken are
listed once, here (`TEXT_TYPES`, `PDF_TYPE`, `IMAGE_SIGNATURES`; every `text/*` is text too).

`media_type_of` is the channel's guess when the owner gives a path: the bytes first (a PDF, an
image), then the name's extension in a table of our own (not the system's `mimetypes` files,
nor Python's built-in table, which differ between machines and versions), then UTF-8 text with
no NUL as `text/plain`; anything else is `application/octet-stream`, which `kind_of` refuses.
"""

from __future__ import annotations

import enum
import re

from .errors import FileRefused
from .text import quoted

__all__ = [
    "EXTENSIONS",
    "IMAGE_SIGNATURES",
    "OCTET_STREAM",
    "PDF_TYPE",
    "TEXT_TYPES",
    "Kind",
    "kind_of",
    "media_type_of",
]


class Kind(enum.Enum):
    """What the model gets of a file: its text, a PDF's text, or an image part."""

    TEXT = "text"
    PDF = "pdf"
    IMAGE = "image"


PDF_TYPE = "application/pdf"
# Types outside text/* whose content is text (every text/* subtype is taken as text).
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/x-yaml", "application/yaml",
     "application/toml"}
)  # fmt: skip
# Each image type taken and the bytes it starts with (WEBP: "RIFF", a length, then "WEBP").
IMAGE_SIGNATURES: dict[str, tuple[bytes, ...]] = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),  # and b"WEBP" at offset 8: `_sniffed`
}
OCTET_STREAM = "application/octet-stream"
_UTF8_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii"})
_TOKEN = r"[a-z0-9][a-z0-9!#$&^_.+-]{0,126}"
_ESSENCE = re.compile(rf"({_TOKEN})/({_TOKEN})")
_CHARSET = re.compile(r"""charset\s*=\s*"?([^";\s]*)"?""")
_TAKEN = (
    f"text (text/*, {', '.join(sorted(TEXT_TYPES))}), PDF ({PDF_TYPE}) and images "
    f"({', '.join(IMAGE_SIGNATURES)})"
)
_NAMES = {PDF_TYPE: "a PDF", **{t: f"a {t[6:].upper()} image" for t in IMAGE_SIGNATURES}}

# The extensions the channel knows (lower case), for a file whose bytes do not say.
EXTENSIONS: dict[str, str] = {
    "txt": "text/plain", "text": "text/plain", "log": "text/plain", "md": "text/markdown",
    "markdown": "text/markdown", "rst": "text/x-rst", "csv": "text/csv",
    "tsv": "text/tab-separated-values", "html": "text/html", "htm": "text/html",
    "css": "text/css", "js": "text/javascript", "py": "text/x-python", "sh": "text/x-shellscript",
    "json": "application/json", "xml": "application/xml", "yaml": "application/x-yaml",
    "yml": "application/x-yaml", "toml": "application/toml", "pdf": PDF_TYPE,
    "png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "gif": "image/gif",
    "webp": "image/webp",
}  # fmt: skip


def kind_of(data: bytes, media_type: str, name: str) -> Kind:
    """What a file declared `media_type` is, once its bytes are seen to match.

    `media_type` may carry parameters (`text/plain; charset=utf-8`); its type and subtype are
    read without regard to case. A text type's `charset`, if given, must be UTF-8 (or ASCII).

    Raises:
        FileRefused: the type is not one we take; the bytes are not what it declares (a PDF
            without `%PDF-`, an image without its signature); or the text is not UTF-8 or
            holds a NUL byte. The message names the file (`name`, quoted and bounded).
    """
    shown = quoted(name)
    essence, parameters = _parsed(media_type)
    if essence is None or not _taken(essence):
        declared = quoted(media_type, 100)
        raise FileRefused(f"{shown} is {declared}, not a type we take; we take {_TAKEN}")
    if essence.startswith("text/") or essence in TEXT_TYPES:
        charset = _CHARSET.search(parameters)
        if charset and charset.group(1).lower() not in _UTF8_CHARSETS:
            raise FileRefused(
                f"{shown} is declared in charset {quoted(charset.group(1), 40)}; "
                "only UTF-8 text is taken (convert it to UTF-8 first)"
            )
        _check_text(data, shown, essence)
        return Kind.TEXT
    if (looks := _sniffed(data)) != essence:
        like = f" (they look like {_NAMES[looks]})" if looks else ""
        raise FileRefused(
            f"{shown} is declared {essence} but its bytes are not {_NAMES[essence]}{like}"
        )
    return Kind.PDF if essence == PDF_TYPE else Kind.IMAGE


def media_type_of(name: str, data: bytes) -> str:
    """A media type for a file the owner gave by path: the one its bytes show (a PDF, an
    image), else the one its extension names in `EXTENSIONS`, else `text/plain` for UTF-8
    without NUL, else `application/octet-stream`. The same on every machine."""
    if sniffed := _sniffed(data):
        return sniffed
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    stem, dot, extension = base.rpartition(".")
    if dot and stem and (known := EXTENSIONS.get(extension.lower())):
        return known
    return "text/plain" if _text_problem(data) is None else OCTET_STREAM


def _parsed(media_type: str) -> tuple[str | None, str]:
    """`type/subtype` in lower case, or None if it is not one; and the parameters' text."""
    essence, _, parameters = media_type.partition(";")
    essence = essence.strip().lower()
    return (essence if _ESSENCE.fullmatch(essence) else None), parameters.lower()


def _taken(essence: str) -> bool:
    return (
        essence.startswith("text/")
        or essence in TEXT_TYPES
        or essence == PDF_TYPE
        or essence in IMAGE_SIGNATURES
    )


def _sniffed(data: bytes) -> str | None:
    """The PDF or image type `data` starts as, if any."""
    if data.startswith(b"%PDF-"):
        return PDF_TYPE
    for media_type, signatures in IMAGE_SIGNATURES.items():
        if data.startswith(signatures) and (media_type != "image/webp" or data[8:12] == b"WEBP"):
            return media_type
    return None


def _check_text(data: bytes, shown: str, essence: str) -> None:
    if (problem := _text_problem(data)) is not None:
        raise FileRefused(f"{shown} is declared {essence} but {problem}")


def _text_problem(data: bytes) -> str | None:
    """Why `data` is not text we take (UTF-8, no NUL), or None."""
    looks = _sniffed(data)
    like = f"; its bytes look like {_NAMES[looks]}" if looks else ""
    if (nul := data.find(b"\x00")) >= 0:
        return f"holds a NUL byte (at byte {nul}), so it is not text{like}"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"is not UTF-8 text (byte 0x{data[error.start]:02x} at byte {error.start}){like}"
    return None
