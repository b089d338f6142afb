"""Attached files (SPEC section 22): what turns a file the owner attached into what the model
gets, apart from sessions, frames and the turn. `sniff` says what a file is (text, a PDF, an
image) from its declared media type and its bytes, or refuses it; `pdf` reads a PDF's text in
a worker process with limits (`pdf_worker`, pypdf); `text` shows a text to the model between
lines nothing in it can forge. `sniff` and `text` are pure; `extract_pdf` is trio code, and is
imported only when first asked for, so a channel that only guesses a media type loads no trio.
"""

from typing import TYPE_CHECKING, Any

from .errors import FileRefused
from .sniff import (
    EXTENSIONS,
    IMAGE_SIGNATURES,
    OCTET_STREAM,
    PDF_TYPE,
    TEXT_TYPES,
    Kind,
    kind_of,
    media_type_of,
)
from .text import quoted, shown_text

__all__ = [
    "EXTENSIONS",
    "IMAGE_SIGNATURES",
    "OCTET_STREAM",
    "PDF_TYPE",
    "TEXT_TYPES",
    "FileRefused",
    "Kind",
    "extract_pdf",
    "kind_of",
    "media_type_of",
    "quoted",
    "shown_text",
]

if TYPE_CHECKING:
    from .pdf import extract_pdf


def __getattr__(name: str) -> Any:
    """`extract_pdf`, imported when first asked for: it brings trio."""
    if name == "extract_pdf":
        from .pdf import extract_pdf

        return extract_pdf
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
