"""The gateway's first network: the Matrix client-server API (`api`) and what its `/sync`
answers say, as the gateway's port hears it (`sync`, pure)."""

from .api import MAX_BODY, Matrix, Refused, Unreachable
from .sync import batch_of, edit_body, message_body, strip_fallback

__all__ = [
    "MAX_BODY",
    "Matrix",
    "Refused",
    "Unreachable",
    "batch_of",
    "edit_body",
    "message_body",
    "strip_fallback",
]
