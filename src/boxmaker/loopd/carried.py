"""The files a turn carries (SPEC section 22), from what was attached to what its `user`
record names and the model gets; decided before anything of the turn is written, so a file
refused leaves nothing.

Each file a turn frame names was brought first by an `attach` (`loopd/uploads.py`: its bytes
checked against its hash and its media type, a PDF's text taken out then, once). Here: the
turn's count against `[files] max_files`; a text file's text and a PDF's, each shown as a block
the model reads after the owner's words (`attached.shown_text`); an image, with a `[tiers]
vision` server, as that server's description of it (asked once an image, in a conversation of
its own), else as an image part, only when the session's server says it takes images
(llama-server's `/props` modalities; the profile's `images` for an OpenAI-style server), else
refused in words.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import trio

from ..attached import FileRefused, Kind, kind_of, quoted, shown_text
from ..layout import upload_file
from ..proto import ChatRequest, FileOffer, ImagePart, SystemMessage, TurnFile, UserMessage
from ..store import Upload, keep_upload_text, read_upload
from .infer import InferError, takes_images
from .loop import Carried, Runtime

__all__ = ["Carried", "FileRefused", "carry"]


DESCRIBER = "You describe images for an assistant that cannot see them."
DESCRIBE = (
    "Describe this image in full for an assistant that cannot see it: what it shows, every "
    "text in it word for word, and any numbers, tables or charts with their values."
)
DESCRIPTION_TOKENS = 1024
NOT_ATTACHED = (
    "{name} was not attached, or no longer is (an attached file waits an hour for its turn, "
    "and none outlives loopd): attach it again"
)
NO_IMAGES = (
    "{name} is an image, and this session's server ({server}) does not take images: "
    "llama-server takes them with a vision model and its --mmproj projector; an OpenAI-style "
    "server, when its profile says `images = true`"
)


async def carry(offers: Sequence[FileOffer], runtime: Runtime, slot: str) -> Carried:
    """What a turn of a session on `slot` carries for the files `offers` name.

    Raises:
        FileRefused: a file is over a limit, was not attached, or is an image the session's
            server cannot take, or the vision tier's could not describe; the message says
            which and why.
        StorageError: an upload could not be read, or a description kept.
    """
    limits = runtime.config.files
    if len(offers) > limits.max_files:
        raise FileRefused(
            f"the message carries {len(offers)} files; [files] max_files is {limits.max_files}"
        )
    files: list[TurnFile] = []
    blocks: list[str] = []
    keep: list[tuple[str, Path | bytes]] = []
    home = runtime.config.paths.home
    for offer in offers:
        name = quoted(offer.name)  # its size was held to [files] max_bytes as it came
        upload, kind = await trio.to_thread.run_sync(_attached, home, offer, name)
        text = upload.text if kind is Kind.PDF else None
        if kind is Kind.IMAGE:
            text = await described(runtime, offer, upload)
            if text is None:  # no vision tier: the session's server sees it
                await _check_images(runtime, slot, name)
        elif kind is Kind.PDF and text is None:
            raise FileRefused(NOT_ATTACHED.format(name=name))
        text_hash = None
        if text is not None:  # a PDF's text, an image as the vision tier described it
            data = text.encode()  # this turn's own: another may write the upload's text meanwhile
            text_hash = hashlib.sha256(data).hexdigest()
            keep.append((text_hash, data))
            blocks.append(shown_text(offer.name, offer.media_type, text))
        elif kind is not Kind.IMAGE:  # up to [files] max_text_chars: in a thread
            made = partial(_shown, offer, upload.data)
            blocks.append(await trio.to_thread.run_sync(made))
        keep.append((offer.sha256, upload_file(home, offer.sha256)))
        files.append(TurnFile(offer.name, offer.media_type, offer.size, offer.sha256, text_hash))
    return Carried(tuple(files), "\n\n".join(blocks), tuple(keep))


def _shown(offer: FileOffer, data: bytes) -> str:
    return shown_text(offer.name, offer.media_type, data.decode())


def _attached(home: Path, offer: FileOffer, name: str) -> tuple[Upload, Kind]:
    """The upload `offer` names, and what it is.

    Raises:
        FileRefused: there is none (or no longer), or not of the offer's size or type.
    """
    upload = read_upload(home, offer.sha256)
    if upload is None:
        raise FileRefused(NOT_ATTACHED.format(name=name))
    if len(upload.data) != offer.size:
        said = f"{len(upload.data):,} bytes, not the {offer.size:,} the message says"
        raise FileRefused(f"{name}: the file attached with its hash is {said}")
    return upload, kind_of(upload.data, offer.media_type, offer.name)


async def described(runtime: Runtime, offer: FileOffer, upload: Upload) -> str | None:
    """The image as the `vision` tier's server describes it (asked once an image: kept
    beside the upload, then in the session), or None when no vision tier is set.

    Raises:
        FileRefused: the vision server could not describe it.
    """
    tier = await runtime.tier("vision")
    if tier is None:
        return None
    if upload.text is not None:  # described when it was attached to another turn
        return upload.text
    client, _context = tier
    image = ImagePart(offer.media_type, offer.sha256, base64.b64encode(upload.data).decode())
    messages = (SystemMessage(DESCRIBER), UserMessage(DESCRIBE, images=(image,)))
    request = ChatRequest("vision", messages, (), thinking=False, max_tokens=DESCRIPTION_TOKENS)
    try:
        async with client.tier_slot("vision", _ignore) as held:
            completion = await held.chat_with_retry(request, _ignore)
    except InferError as error:
        raise FileRefused(
            f"{quoted(offer.name)} is an image, and the vision tier's server ({client.name}) "
            f"could not describe it: {error}"
        ) from error
    said = (completion.content or "").strip()
    if not said:
        raise FileRefused(
            f"{quoted(offer.name)} is an image, and the vision tier's server ({client.name}) "
            "said nothing of it"
        )
    text = f"(the image, as the vision server {client.name} describes it)\n{said}\n"
    await trio.to_thread.run_sync(keep_upload_text, runtime.config.paths.home, offer.sha256, text)
    return text


def _ignore(_event: object) -> None:
    pass


async def _check_images(runtime: Runtime, slot: str, name: str) -> None:
    try:
        client = runtime.client_of(slot)
        takes = await takes_images(client)
    except InferError as error:
        raise FileRefused(
            f"{name} is an image, and whether this session's server takes images could not "
            f"be asked: {error}"
        ) from error
    if not takes:
        raise FileRefused(NO_IMAGES.format(name=name, server=client.name))
