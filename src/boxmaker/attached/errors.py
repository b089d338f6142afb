"""The attached files' error: one kind, for the owner to read.

    FileRefused(reason)     the file is not taken: its type, its bytes, its limits

`str(error)` is a sentence the owner can act on, naming the file where the refusing function
was given its name (`kind_of`) and the limit where one was crossed (`extract_pdf`: "the PDF has
41 pages; [files] max_pdf_pages is 40"). Nothing is kept of a refused file.
"""

from __future__ import annotations

__all__ = ["FileRefused"]


class FileRefused(Exception):
    """An attached file is not taken; `reason` (and `str(error)`) says why, in words."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)
