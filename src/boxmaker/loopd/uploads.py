"""`attach`: a file brought to loopd for a turn to come (SPEC section 22, docs/protocol.md
"Files in a turn"). Its bytes come in pieces after the `attach` frame; loopd holds them in
memory (a larger file than `[files] max_bytes` is refused before its first piece is read, and
all the attaches under way together hold at most `IN_FLIGHT` files' worth), checks them against
the declared hash and media type, takes a PDF's text out once, in a worker process with limits
(`READERS` at once, `MOST_WAITING` more waiting), and keeps both in `<home>/uploads/` (at most
`UPLOADS` files' worth) for the turn that names the file. A file that does not come whole,
within its time, or is refused, leaves nothing.
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
from ..proto import AttachedFrame, AttachFrame, ErrorCode, FileOffer, Frame, WireError
from ..sansio import END
from ..session import StorageError
from ..store import UploadsFull, keep_upload

__all__ = ["IN_FLIGHT", "MOST_WAITING", "PIECE_TIMEOUT_S", "READERS", "UPLOADS", "Uploads"]

log = logging.getLogger("loopd")

PIECE_TIMEOUT_S = 30.0  # the longest loopd waits for a file's next piece
SLOWEST = 256 * 1024  # bytes a second: a file may take PIECE_TIMEOUT_S, plus its size at this
IN_FLIGHT = 4  # files of [files] max_bytes that attaches under way may hold in memory at once
READERS = 2  # PDF readers (worker processes of some 60 MB each) at once
MOST_WAITING = 4  # PDFs waiting for a reader; past it an attach is refused, to try again
UPLOADS = 16  # files of [files] max_bytes that <home>/uploads/ may hold

NextPiece = Callable[[], Awaitable[object]]  # the connection's next event


class Uploads:
    """The attaches of one loopd: what they hold in memory, the PDF readers, the uploads."""

    def __init__(self, limits: FilesConfig, home: Path) -> None:
        self.limits, self.home = limits, home
        self.readers = trio.CapacityLimiter(READERS)
        self.holding = 0  # bytes the attaches under way announced

    async def receive(
        self, frame: AttachFrame, next_piece: NextPiece, whole: Callable[[], None]
    ) -> Frame | None:
        """Read the file `frame` announces (each piece from `next_piece`; `whole` is called
        once the last has come), check it, keep it; the final frame to answer (`attached`,
        or an error), None when the channel left. Its bytes count against `IN_FLIGHT` until
        then, whatever it waits for."""
        offer, limits = frame.offer, self.limits
        name = quoted(offer.name)
        if offer.size > limits.max_bytes:
            most = limits.max_bytes
            return _refused(f"{name} is {offer.size:,} bytes; [files] max_bytes is {most:,}")
        if self.holding + offer.size > IN_FLIGHT * limits.max_bytes:
            return _refused(f"{name}: loopd is taking in other files now; attach it again soon")
        self.holding += offer.size
        try:
            data = await _pieces(name, offer.size, next_piece)
            if not isinstance(data, bytes):
                return data
            whole()
            return await self._kept(frame.offer, name, data)
        finally:
            self.holding -= offer.size

    async def _kept(self, offer: FileOffer, name: str, data: bytes) -> Frame:
        """Check the file's bytes (in a thread: a hash and a sniff of up to `max_bytes`),
        read a PDF's text, keep both; the final frame."""
        limits = self.limits
        try:
            kind = await trio.to_thread.run_sync(_checked, offer, name, data, limits)
            text = await self._text(name, data) if kind is Kind.PDF else None
            most = UPLOADS * limits.max_bytes
            await trio.to_thread.run_sync(keep_upload, self.home, offer.sha256, data, text, most)
        except FileRefused as error:
            return _refused(str(error))
        except UploadsFull as full:
            return _refused(f"{name}: {full}; attach it again once some are an hour old")
        except StorageError as error:
            log.error("attach: %s", error)
            return WireError(ErrorCode.INTERNAL, str(error))
        log.info("attached %s (%s, %d bytes)", offer.sha256[:12], kind.value, offer.size)
        return AttachedFrame(offer.sha256, kind.value, chars=len(text or ""))

    async def _text(self, name: str, data: bytes) -> str:
        """A PDF's text, by a reader when one is free.

        Raises:
            FileRefused: past a limit of its reader, or too many PDFs wait for one.
        """
        if self.readers.statistics().tasks_waiting >= MOST_WAITING:
            raise FileRefused(f"{name}: {MOST_WAITING} PDFs wait to be read; attach it again soon")
        limits = self.limits
        try:
            async with self.readers:
                return await extract_pdf(
                    data,
                    max_pages=limits.max_pdf_pages,
                    max_chars=limits.max_text_chars,
                    timeout_s=limits.pdf_timeout_s,
                    memory_bytes=limits.pdf_memory_mib * 1024 * 1024,
                )
        except FileRefused as error:
            raise FileRefused(f"{name}: {error}") from error


async def _pieces(name: str, size: int, next_piece: NextPiece) -> bytes | WireError | None:
    """The file's bytes, each piece within `PIECE_TIMEOUT_S` and the whole within its time
    at `SLOWEST`; a `bad_frame` error, or None when the channel left."""
    data = bytearray()
    with trio.move_on_after(PIECE_TIMEOUT_S + size / SLOWEST) as whole:
        while len(data) < size:
            piece: object = BadFrame(f"no piece of {name} came within {PIECE_TIMEOUT_S:g} s")
            with trio.move_on_after(PIECE_TIMEOUT_S):
                piece = await next_piece()
            if piece is END:
                return None
            if not isinstance(piece, Piece):
                said = piece.reason if isinstance(piece, BadFrame) else f"not a piece: {piece!r}"
                return WireError(ErrorCode.BAD_FRAME, said)
            data += piece.data
    if whole.cancelled_caught:
        seconds = PIECE_TIMEOUT_S + size / SLOWEST
        return WireError(ErrorCode.BAD_FRAME, f"{name} did not come within {seconds:g} s")
    return bytes(data)


def _checked(offer: FileOffer, name: str, data: bytes, limits: FilesConfig) -> Kind:
    """What the file is, once its bytes are seen to be the offer's.

    Raises:
        FileRefused: another hash, a type the bytes do not match, a text over
            `[files] max_text_chars`.
    """
    if hashlib.sha256(data).hexdigest() != offer.sha256:
        raise FileRefused(f"{name}: its bytes do not match the SHA-256 its attach frame gave")
    kind = kind_of(data, offer.media_type, offer.name)
    if kind is Kind.TEXT and (chars := len(data.decode())) > limits.max_text_chars:
        most = limits.max_text_chars
        raise FileRefused(f"{name} is {chars:,} characters; [files] max_text_chars is {most:,}")
    return kind


def _refused(reason: str) -> WireError:
    return WireError(ErrorCode.FILE_REFUSED, reason)
