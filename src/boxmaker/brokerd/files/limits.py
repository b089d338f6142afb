"""How much a file tool may read, write, list and search (`FileLimits`), apart from the tools
so that each of their modules (`files/file_tools.py`, `search.py`) reads the same bounds. Pure."""

from __future__ import annotations

from attrs import frozen

__all__ = ["FileLimits"]


@frozen
class FileLimits:
    """How much a file tool may read, write, list and search."""

    read_bytes: int = 1024 * 1024  # most bytes read_file reads from a file
    read_lines: int = 2000  # default `limit` of read_file
    write_bytes: int = 8 * 1024 * 1024  # most bytes write_file/edit_file write
    list_entries: int = 1000  # most entries list_dir returns (then "... and N more")
    search_files: int = 2000  # most files search_files opens
    search_file_bytes: int = 1024 * 1024  # files larger are skipped by search_files
    search_lines: int = 200  # most matching lines returned
    search_line_chars: int = 65536  # longer lines are not searched (a match's memory grows)
    search_seconds: float = 5.0  # whole search budget (regex `timeout=` per call from what is left)
    # Bounded before compiling: `regex` writes out each counted repeat's copies, nested counts
    # multiplying (`(?:(?:a{1000}){1000}){1000}`, 32 characters: gigabytes and minutes).
    pattern_chars: int = 1000
    pattern_size: int = 20_000  # the pattern's parts once its repeats are written out
    pattern_groups: int = 20  # capturing groups (kept at every step a match backs off)
