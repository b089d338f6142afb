"""`attach`: a file brought to loopd for a turn to come (SPEC section 22, docs/protocol.md
"Files in a turn"). Its bytes come in pieces after the `attach` frame; loopd holds them in
memory (at most `[files] max_bytes`: a larger file is refused before its first piece is
read), checks them against the declared hash and media type, takes a PDF's text out once, in
a worker process with limits, and keeps both in `<home>/uploads/` for the turn that names the
file. A file that does not come whole, or is refused, leaves nothing.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from ..attached import FileRefused, Kind, extract_pdf, kind_of, quoted
from ..channel import BadFrame, Piece
from ..config import FilesConfig
from ..proto import AttachedFrame, AttachFrame, ErrorCode, Frame, WireError
from ..sansio import END
from ..session import StorageError
from ..store import keep_upload

__all__ = ["PIECE_TIMEOUT_S", "receive_file"]

log = logging.getLogger("loopd")

PIECE_TIMEOUT_S = 30.0  # the longest loopd waits for a file's next piece

NextPiece = Callable[[], Awaitable[object]]  # the connection's next event


async def receive_file(
    frame: AttachFrame,
    next_piece: NextPiece,
    limits: FilesConfig,
    home: Path,
    readers: trio.CapacityLimiter,
) -> Frame | None:
    """Read the file `frame` announces (each piece from `next_piece`), check it, keep it;
    the final frame to answer (`attached`, or an error), None when the channel left. A PDF's
    text is taken out by a worker, `readers` of them at most at once."""
    offer = frame.offer
    name = quoted(offer.name)
    if offer.size > limits.max_bytes:
        return _refused(
            f"{name} is {offer.size:,} bytes; [files] max_bytes is {limits.max_bytes:,}"
        )
    data = bytearray()
    digest = hashlib.sha256()
    while len(data) < offer.size:
        piece: object = BadFrame(f"no piece of {name} came within {PIECE_TIMEOUT_S:g} s")
        with trio.move_on_after(PIECE_TIMEOUT_S):
            piece = await next_piece()
        if piece is END:
            return None
        if not isinstance(piece, Piece):
            reason = piece.reason if isinstance(piece, BadFrame) else f"not a piece: {piece!r}"
            return WireError(ErrorCode.BAD_FRAME, reason)
        data += piece.data
        digest.update(piece.data)
    if digest.hexdigest() != offer.sha256:
        return _refused(f"{name}: its bytes do not match the SHA-256 its attach frame gave")
    whole = bytes(data)
    try:
        kind = kind_of(whole, offer.media_type, offer.name)
    except FileRefused as error:
        return _refused(str(error))
    text = None
    if kind is Kind.PDF:
        try:
            async with readers:
                text = await extract_pdf(
                    whole,
                    max_pages=limits.max_pdf_pages,
                    max_chars=limits.max_text_chars,
                    timeout_s=limits.pdf_timeout_s,
                    memory_bytes=limits.pdf_memory_mib * 1024 * 1024,
                )
        except FileRefused as error:
            return _refused(f"{name}: {error}")
    try:
        await trio.to_thread.run_sync(keep_upload, home, offer.sha256, whole, text)
    except StorageError as error:
        log.error("attach: %s", error)
        return WireError(ErrorCode.INTERNAL, str(error))
    log.info("attached %s (%s, %d bytes)", offer.sha256[:12], kind.value, offer.size)
    return AttachedFrame(offer.sha256, kind.value, chars=len(text or ""))


def _refused(reason: str) -> WireError:
    return WireError(ErrorCode.FILE_REFUSED, reason)
