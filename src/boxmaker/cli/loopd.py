"""`loopd`: the agent-loop daemon."""

from __future__ import annotations

import argparse

from .. import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="loopd",
        description="Boxmaker's agent loop: runs turns for sessions kept on disk, "
        "talking to a local llama-server, and streams them over a Unix socket.",
    )
    parser.add_argument("--version", action="version", version=f"loopd {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0
