"""`--version` for every command: `loopd`, `brokerd` and `bxctl`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

__all__ = ["VersionAction"]


class VersionAction(argparse.Action):
    """`--version`: prints `<prog> <version>` and exits. The version is read only when asked:
    reading it imports `importlib.metadata`, a sixth of `bxctl sessions`' start."""

    def __init__(
        self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **_kwargs: Any
    ) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show the version and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        from . import __version__

        print(f"{parser.prog} {__version__}")
        parser.exit()
