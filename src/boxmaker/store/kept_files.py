"""The files a session's turns carried (SPEC section 22), kept in its folder by their hashes:
`files/<sha256>`, each a file's bytes or the text loopd took from one. Blocking.

A file is written once (the same bytes are one file), before the `user` record that names it,
and read back only when its hash still matches: a file changed on disk is never sent.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import hashlib
import os
import secrets
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import attrs

from .. import layout
from ..proto import ChatMessage, ImagePart, UserMessage
from ..session import StorageError
from .fs import FileSystem, storage_errors

__all__ = ["TurnFiles"]

_MOST_IMAGE_BYTES = 64 * 1024 * 1024  # of base64 kept for the requests: the newest used


class TurnFiles:
    """A session's kept files (`folder` is the session's), and the images its requests carry,
    their base64 kept in memory once read."""

    def __init__(self, fs: FileSystem, folder: Path) -> None:
        self._fs = fs
        self._folder = folder
        self._images: OrderedDict[str, str] = OrderedDict()  # by hash, the last used last

    def keep(self, sha256: str, source: Path | bytes) -> bool:
        """Keep `source` as `files/<sha256>`, unless it is there already: a file (an upload,
        written whole and fsynced, its hash checked as it was read) linked under a name of its
        own, then renamed into place and the folder fsynced, so no byte is copied (unless it
        is on another file system); or bytes (a text loopd made), written so. Whether it was
        new here.

        Raises:
            StorageError: naming the file.
        """
        path = layout.turn_file(self._folder, sha256)
        if self.read(sha256) is not None:
            return False
        with storage_errors(path):
            self._fs.makedirs(path.parent)
            if isinstance(source, bytes):
                self._fs.replace_file(path, source)
                return True
            partial = path.with_name(layout.partial_name(path.name, secrets.token_hex(4)))
            try:
                os.link(source, partial, follow_symlinks=False)
            except OSError as error:
                if error.errno != errno.EXDEV:
                    raise
                self._fs.replace_file(path, self._fs.read(source))
                return True
            try:
                self._fs.rename(partial, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(partial)
                raise
            self._fs.fsync_dir(path.parent)
        return True

    def drop(self, kept: list[str]) -> None:
        """Remove files `keep` brought in for a message that was then not kept (a refusal for
        its size): no record names them. A failure is left alone (`verify` never minds a
        file no record names)."""
        for sha256 in kept:
            with contextlib.suppress(OSError):
                os.unlink(layout.turn_file(self._folder, sha256))

    def read(self, sha256: str) -> bytes | None:
        """A kept file by its hash; None when it is missing or is not what the hash says.

        Raises:
            StorageError: the file could not be read.
        """
        path = layout.turn_file(self._folder, sha256)
        with storage_errors(path, reading=True):
            data = self._fs.read_if_there(path)
        return data if data is not None and hashlib.sha256(data).hexdigest() == sha256 else None

    def with_images(self, messages: Sequence[ChatMessage]) -> tuple[ChatMessage, ...]:
        """`messages`, each image of a user message with its bytes.

        Raises:
            StorageError: an image's file is missing or is not what its hash says.
        """
        return tuple(map(self._with_images, messages))

    def _with_images(self, message: ChatMessage) -> ChatMessage:
        if type(message) is not UserMessage or not message.images:
            return message
        return attrs.evolve(message, images=tuple(map(self._image, message.images)))

    def _image(self, image: ImagePart) -> ImagePart:
        data = self._images.get(image.sha256)
        if data is None:
            raw = self.read(image.sha256)
            if raw is None:
                path = layout.turn_file(self._folder, image.sha256)
                raise StorageError(path, "the image is missing, or changed since it was kept")
            data = base64.b64encode(raw).decode()
            self._images[image.sha256] = data
            while (
                sum(map(len, self._images.values())) > _MOST_IMAGE_BYTES and len(self._images) > 1
            ):
                self._images.popitem(last=False)  # the least recently used
        self._images.move_to_end(image.sha256)
        return attrs.evolve(image, data=data)
