"""`bxctl`: the command-line channel to loopd."""

from __future__ import annotations

import argparse

from .. import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bxctl",
        description="Talk to Boxmaker's loopd over its Unix socket.",
    )
    parser.add_argument("--version", action="version", version=f"bxctl {__version__}")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    parser.parse_args(argv)
    parser.print_help()
    return 0
