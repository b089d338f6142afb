"""The chat's view of other channels' turns: whole lines go above the line editor's prompt."""

from __future__ import annotations

import io
from typing import TextIO

from boxmaker.cli.watch import Above


def test_text_goes_above_the_prompt_a_whole_line_at_a_time() -> None:
    written: list[str] = []

    def above(text: str, stream: TextIO) -> None:
        written.append(text)

    lines = Above(above, io.StringIO())
    lines.write("Later ")
    lines.write("answer")
    assert written == []  # a line is written once it is whole
    lines.write(".\nNext line,\nand a part")
    assert written == ["Later answer.\nNext line,\n"]
    lines.write(" of it.\n")
    assert written == ["Later answer.\nNext line,\n", "and a part of it.\n"]
