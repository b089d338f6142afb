"""A run's folders held while it runs (`hold`): each opened (`O_PATH`) and checked to be the
folder it must be, from a shown folder down without following a link, their descriptors kept
to the run's end; and where root stages them (`pick_stage`). The I/O half of `mounts.py`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import PurePosixPath

from .launch import STAGES
from .mounts import Mount, Shown

__all__ = ["NotShown", "hold", "pick_stage", "release"]

_HELD = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC


def pick_stage(sources: Sequence[PurePosixPath]) -> str:
    """Where root stages a run's folders: the first of `STAGES` that is a folder and neither
    holds, nor is, nor lies in one of `sources` (its tmpfs hides what is beneath it).

    Raises:
        OSError: none is.
    """
    for stage in STAGES:
        place = PurePosixPath(stage)
        clash = any(
            place == s or place.is_relative_to(s) or s.is_relative_to(place) for s in sources
        )
        if not clash and os.path.isdir(stage) and not os.path.islink(stage):
            return stage
    raise OSError(f"no folder of {', '.join(STAGES)} is free to stage the run's folders in")


class NotShown(OSError):
    """A folder a run must be shown is not the one it was (a root moved or replaced): the
    run is refused; `str()` says which."""


def hold(mounts: Sequence[Mount], shown: Sequence[Shown]) -> list[tuple[str, int, str]]:
    """Open each of `mounts`' folders, in order (`O_PATH`): a shown folder by its path, a
    folder below one from its parent's descriptor without following a link, each checked to
    be what it must be. Its host path, descriptor and identity ("dev:ino") for each.

    Raises:
        NotShown: one is gone, a link, or another folder than it was.
        OSError: one cannot be opened.
    """
    held: list[tuple[str, int, str]] = []
    by_place: dict[tuple[int, tuple[str, ...]], int] = {}
    try:
        for mount in mounts:
            top = shown[mount.top]
            path = str(top.path.joinpath(*mount.parts))
            try:
                if not mount.parts:
                    fd = os.open(path, _HELD)
                else:
                    parent = by_place[mount.top, mount.parts[:-1]]
                    fd = os.open(mount.parts[-1], _HELD | os.O_NOFOLLOW, dir_fd=parent)
            except (FileNotFoundError, NotADirectoryError) as error:
                raise NotShown(_moved(mount.name, path)) from error
            held.append((path, fd, ""))
            st = os.fstat(fd)
            if mount.identity is not None and (st.st_dev, st.st_ino) != mount.identity:
                raise NotShown(_moved(mount.name, path))
            by_place[mount.top, mount.parts] = fd
            held[-1] = (path, fd, f"{st.st_dev}:{st.st_ino}")
    except BaseException:
        for _path, fd, _identity in held:
            os.close(fd)
        raise
    return held


def release(held: Sequence[tuple[str, int, str]]) -> None:
    for _path, fd, _identity in held:
        os.close(fd)


def _moved(name: str, path: str) -> str:
    return (
        f"not run: {name} is no longer the folder it was ({path} was moved or replaced): the "
        "sandbox shows nothing until the owner puts it back or starts brokerd again"
    )
