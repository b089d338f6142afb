"""loopd's side of `attach` (`loopd/uploads.py`) and a session's kept files
(`store/kept_files.py`): a file is kept only whole, checked and within its limits; a kept file
is read back only while it is what its hash says."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from boxmaker import layout
from boxmaker import proto as p
from boxmaker.channel import BadFrame, Piece
from boxmaker.config import FilesConfig
from boxmaker.loopd.uploads import IN_FLIGHT, PIECE_TIMEOUT_S, UPLOADS, Uploads
from boxmaker.sansio import END
from boxmaker.session import StorageError
from boxmaker.store import FileSystem, keep_upload, read_upload
from boxmaker.store.kept_files import TurnFiles

TEXT = b"# Shopping\n- tea\n"


def frame(data: bytes, *, name: str = "notes.md", media_type: str = "text/markdown",
          sha256: str | None = None, size: int | None = None) -> p.AttachFrame:  # fmt: skip
    digest = sha256 or hashlib.sha256(data).hexdigest()
    return p.AttachFrame(p.FileOffer(name, media_type, len(data) if size is None else size, digest))


def pieces(*events: object) -> Iterator[object]:
    yield from events


async def receive(home: Path, attach: p.AttachFrame, *events: object, **limits: int) -> object:
    given = pieces(*events)

    async def next_piece() -> object:
        await trio.lowlevel.checkpoint()
        try:
            return next(given)
        except StopIteration:
            await trio.sleep_forever()
            raise AssertionError("unreachable") from None

    uploads = Uploads(FilesConfig(**limits), home)
    return await uploads.receive(attach, next_piece, lambda: None)


def uploads(home: Path) -> list[str]:
    folder = layout.uploads_folder(home)
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


async def test_a_whole_checked_file_is_kept_for_its_turn(tmp_path: Path) -> None:
    answer = await receive(tmp_path, frame(TEXT), Piece(TEXT[:5], False), Piece(TEXT[5:], True))
    sha = hashlib.sha256(TEXT).hexdigest()
    assert answer == p.AttachedFrame(sha, "text")
    assert read_upload(tmp_path, sha) is not None
    assert uploads(tmp_path) == [sha]


async def test_bytes_that_do_not_match_the_hash_are_refused_and_nothing_kept(
    tmp_path: Path,
) -> None:
    other = b"# Shopping\n- tee\n"
    answer = await receive(tmp_path, frame(TEXT), Piece(other, True))
    assert isinstance(answer, p.WireError)
    assert answer.code is p.ErrorCode.FILE_REFUSED
    assert "do not match the SHA-256" in answer.message
    assert uploads(tmp_path) == []


async def test_a_file_over_max_bytes_is_refused_before_its_first_piece(tmp_path: Path) -> None:
    answer = await receive(tmp_path, frame(TEXT), max_bytes=10)  # no piece is ever given
    assert answer == p.WireError(
        p.ErrorCode.FILE_REFUSED, '"notes.md" is 17 bytes; [files] max_bytes is 10'
    )


async def test_a_type_the_bytes_do_not_match_is_refused(tmp_path: Path) -> None:
    answer = await receive(tmp_path, frame(TEXT, name="a.pdf", media_type="application/pdf"),
                           Piece(TEXT, True))  # fmt: skip
    assert isinstance(answer, p.WireError)
    assert answer.code is p.ErrorCode.FILE_REFUSED
    assert uploads(tmp_path) == []


async def test_a_channel_that_leaves_or_errs_mid_file_leaves_nothing(tmp_path: Path) -> None:
    assert await receive(tmp_path, frame(TEXT), Piece(TEXT[:5], False), END) is None
    bad = await receive(tmp_path, frame(TEXT), BadFrame("a file_piece's data is not base64"))
    assert bad == p.WireError(p.ErrorCode.BAD_FRAME, "a file_piece's data is not base64")
    assert uploads(tmp_path) == []


async def test_a_channel_that_stops_sending_is_told_after_the_piece_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    started = trio.current_time()
    answer = await receive(tmp_path, frame(TEXT), Piece(TEXT[:5], False))
    assert isinstance(answer, p.WireError)
    assert answer.code is p.ErrorCode.BAD_FRAME
    assert "no piece" in answer.message
    assert trio.current_time() - started == pytest.approx(PIECE_TIMEOUT_S)


def test_a_kept_file_is_read_back_only_while_it_is_what_its_hash_says(tmp_path: Path) -> None:
    data = b"\x89PNG\r\n\x1a\n" + bytes(100)
    sha = hashlib.sha256(data).hexdigest()
    keep_upload(tmp_path, sha, data, None)
    files = TurnFiles(FileSystem(), tmp_path / "session")
    files.keep(sha, layout.upload_file(tmp_path, sha))
    kept = layout.turn_file(tmp_path / "session", sha)
    assert kept.read_bytes() == data
    assert files.read(sha) == data
    message = p.UserMessage("What is it?", images=(p.ImagePart("image/png", sha),))
    [filled] = files.with_images([message])
    assert isinstance(filled, p.UserMessage)
    assert filled.images[0].data == base64.b64encode(data).decode()
    kept.unlink()
    kept.write_bytes(data[:-1] + b"\x01")  # changed on disk: never sent
    assert files.read(sha) is None
    with pytest.raises(StorageError, match="missing, or changed"):
        TurnFiles(FileSystem(), tmp_path / "session").with_images([message])


async def test_attaches_under_way_hold_at_most_their_share_of_memory(tmp_path: Path) -> None:
    uploads = Uploads(FilesConfig(max_bytes=100), tmp_path)
    answers: list[object] = []

    async def never() -> object:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        for number in range(IN_FLIGHT):  # each waits for its pieces, holding its 100 bytes
            attach = frame(bytes(100), name=f"f{number}.txt")
            nursery.start_soon(uploads.receive, attach, never, lambda: None)
        await trio.testing.wait_all_tasks_blocked()
        answers.append(await uploads.receive(frame(b"x"), never, lambda: None))
        nursery.cancel_scope.cancel()
    [refused] = answers
    assert isinstance(refused, p.WireError)
    assert "taking in other files now" in refused.message
    assert uploads.holding == 0  # given back, however each ended


async def test_a_file_must_come_whole_within_its_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    data = bytes(10)
    given = iter([Piece(data[i : i + 1], i == 9) for i in range(10)])

    async def trickle() -> object:
        await trio.sleep(PIECE_TIMEOUT_S - 1)  # each piece in time, the whole too slow
        return next(given)

    answer = await Uploads(FilesConfig(), tmp_path).receive(frame(data), trickle, lambda: None)
    assert isinstance(answer, p.WireError)
    assert answer.code is p.ErrorCode.BAD_FRAME
    assert "did not come within" in answer.message
    assert uploads(tmp_path) == []


async def test_the_uploads_hold_at_most_their_share_of_the_disk(tmp_path: Path) -> None:
    said = []
    for number in range(UPLOADS + 2):
        data = f"file {number:03}\n".encode()  # 9 bytes each; max_bytes 9: 16 fit
        said.append(await receive(tmp_path, frame(data), Piece(data, True), max_bytes=9))
    assert all(isinstance(answer, p.AttachedFrame) for answer in said[:UPLOADS])
    refused = said[UPLOADS]
    assert isinstance(refused, p.WireError)
    assert "waiting for a turn hold 144 bytes already" in refused.message
    assert len(uploads(tmp_path)) == UPLOADS


async def test_a_text_over_max_text_chars_is_refused_naming_it(tmp_path: Path) -> None:
    text = "é" * 1001  # characters, not bytes: 2,002 bytes
    data = text.encode()
    answer = await receive(tmp_path, frame(data), Piece(data, True), max_text_chars=1000)
    assert answer == p.WireError(
        p.ErrorCode.FILE_REFUSED,
        '"notes.md" is 1,001 characters; [files] max_text_chars is 1,000',
    )
