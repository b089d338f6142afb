"""The gateway's first network: the Matrix client-server API (`api`) and what its `/sync`
answers say, as the gateway's port hears it (`sync` and, for files and images, `media`; both
pure)."""

from .api import MAX_BODY, FileTooLarge, Matrix, Refused, Unreachable
from .media import download_paths, mxc_parts, sent_of
from .sync import batch_of, edit_body, message_body, strip_fallback

__all__ = [
    "MAX_BODY",
    "FileTooLarge",
    "Matrix",
    "Refused",
    "Unreachable",
    "batch_of",
    "download_paths",
    "edit_body",
    "message_body",
    "mxc_parts",
    "sent_of",
    "strip_fallback",
]
