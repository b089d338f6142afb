"""The two sentinels every sans-IO parser here returns besides a value (as h11's do):
`NEED_DATA` (feed more bytes) and `END` (the stream ended and everything was returned).
Shared by the SSE decoder and the frame codec. Pure.
"""

from __future__ import annotations

import enum

__all__ = ["END", "NEED_DATA", "Signal"]


class Signal(enum.Enum):
    NEED_DATA = "NEED_DATA"
    END = "END"


NEED_DATA = Signal.NEED_DATA
END = Signal.END
