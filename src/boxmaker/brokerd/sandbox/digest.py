"""A cell's result as the model reads it, its digest (SPEC section 22), and what the interpreter
is given with its next cell. Pure: `kernel.py` runs the cell and calls these.

A digest is the cell's outputs, numbered (`[1]`, `[2]`, ...: one output is what one top-level
statement printed, its child processes' output included, stdout and stderr as one), then
`Last value:` and its repr, or `Error:` and the cell's own frames of its traceback. A value (an
output or the last value) longer than the budget (`[sandbox] digest_value_tokens`, in bytes at
the project's estimate of tokens per byte) is kept in the interpreter and shown as a stub: its
size, the exact call that returns it in a later cell (`values.get("<number>@<interpreter>",
index)`, the index an output's number or `"last"`) and how it begins. The interpreter's name
is brokerd's, random, so that a stub of an interpreter that has ended is never answered by
another one's value. What the cell printed is kept as a command's output is (`Outputs`: its
first and last `KEEP` bytes), so a stub holds at most that.
"""

from __future__ import annotations

import json
from typing import Any

from attrs import frozen

from ...session import DEFAULT_TOKENS_PER_BYTE

__all__ = [
    "KEEP",
    "MOST_OUTPUTS",
    "MOST_SH_LAST",
    "Digest",
    "Kept",
    "Outputs",
    "Spool",
    "budget_of",
    "digest",
    "lost_state",
    "sh_last",
]

KEEP = 256 * 1024  # bytes of what a command or a cell printed kept from its start, and its end
MOST_OUTPUTS = 1000  # numbered in a cell; what the statements after print joins the last
MOST_SH_LAST = 256 * 1024  # characters of a shell output bound as `sh.last`


def budget_of(tokens: int) -> int:
    """`tokens` as bytes of text, at the estimate the project sizes text with elsewhere."""
    return int(tokens / DEFAULT_TOKENS_PER_BYTE)


class Spool:
    """Output as it comes: its first `keep` bytes and its last `keep`, and how many in all."""

    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes | bytearray) -> None:
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            del self.tail[: max(0, len(self.tail) - self.keep)]

    def text(self) -> str:
        head = self.head.decode(errors="replace")
        if not self.tail:
            return head
        left_out = self.total - len(self.head) - len(self.tail)
        gap = f"\n[... {left_out:,} bytes of output not kept ...]\n" if left_out else ""
        return head + gap + self.tail.decode(errors="replace")


class Outputs(Spool):
    """What a cell printed, as it came, divided into outputs where the interpreter cut it:
    its first `keep` bytes and its last `keep` (the rest counted), and where each output
    starts (at most `most` of them: the cuts after that are not taken)."""

    def __init__(self, keep: int = KEEP, most: int = MOST_OUTPUTS) -> None:
        super().__init__(keep)
        self.most = most
        self.starts = [0]  # where each output starts, in bytes printed before it
        self.joined = False  # cuts were not taken: the last output holds several

    def cut(self) -> None:
        """An output ends here (nothing, if nothing was printed since the last)."""
        if self.total == self.starts[-1]:
            return
        if len(self.starts) >= self.most:
            self.joined = True
            return
        self.starts.append(self.total)

    def texts(self) -> list[tuple[int, str]]:
        """Each output's number and kept text, in order; an output that was printed wholly
        in the part not kept is not there (its number is missing)."""
        held, cut_at = len(self.head), self.total - len(self.tail)  # the tail's first byte
        said = []
        ends = [*self.starts[1:], self.total]
        for number, (start, end) in enumerate(zip(self.starts, ends, strict=True), 1):
            first = self.head[start : min(end, held)]
            last = self.tail[max(start, cut_at) - cut_at : end - cut_at] if end > cut_at else b""
            if not (first or last):
                continue
            gap = min(end, cut_at) - max(start, held)
            text = first.decode(errors="replace")
            if gap > 0:
                text += f"\n[... {gap:,} bytes of this output not kept ...]\n"
            said.append((number, text + last.decode(errors="replace")))
        return said


@frozen
class Kept:
    """A value the interpreter is to keep: `values.get(cell, index)` returns `text`."""

    cell: str
    index: int | str
    text: str


@frozen
class Digest:
    text: str
    kept: tuple[Kept, ...]


def digest(
    outputs: Outputs, end: dict[str, str], *, cell: str, budget: int, keeping: bool
) -> Digest:
    """The digest of `cell` from what it printed and its end (`value`, `type`, `error`; {}
    when it has none); past `budget` bytes a value is a stub and kept, if `keeping` (the
    interpreter lives on), else shown whole."""
    parts: list[str] = []
    kept: list[Kept] = []

    def shown(index: int | str, text: str, head: str, kind: str = "") -> str:
        size = len(text.encode())
        if not keeping or size <= budget:
            return head + text + ("" if text.endswith("\n") else "\n")
        kept.append(Kept(cell, index, text))
        call = f"values.get({json.dumps(cell)}, {json.dumps(index)})"
        return (
            f"{head}({kind}{size:,} bytes, over the digest's {budget:,}: kept; {call} returns "
            f"it whole in a later cell.) It begins:\n{_beginning(text, budget // 4)}\n[...]\n"
        )

    previous = 0
    for number, text in outputs.texts():
        if number > previous + 1:
            parts.append(f"[... outputs {previous + 1} to {number - 1} not kept ...]\n")
        parts.append(shown(number, text, f"[{number}] "))
        previous = number
    if outputs.joined:
        parts.append(f"(Only {outputs.most:,} are numbered: the last holds what followed.)\n")
    if (error := end.get("error")) is not None:
        parts.append("Error:\n" + error)
    elif (value := end.get("value")) is not None:
        kind = f"a {end['type']}; " if end.get("type") else ""
        parts.append(shown("last", value, "Last value: ", kind))
    return Digest("".join(parts).rstrip("\n"), tuple(kept))


def lost_state(left: str | None, lost: str | None, memory_bytes: int) -> list[str]:
    """What a cell says after its digest when its interpreter was ended: it `left` processes
    or threads running, or it was `lost` (why)."""
    said = []
    if left is not None:
        said.append(
            f"[the cell left {left} running after it ended: nothing a cell starts may run on, "
            "so the interpreter was stopped with them and its state lost (every variable); "
            "the next cell starts a new one. Wait for what a cell starts.]"
        )
    if lost is not None:
        said.append(
            f"[{lost}: the interpreter was stopped and its state lost (every variable); the "
            f"next cell starts a new one. Memory is capped at {memory_bytes // 2**20} MiB.]"
        )
    return said


def _beginning(text: str, most: int) -> str:
    """The start of `text`: at most `most` bytes, cut at a line's end where one is past half."""
    start = text.encode()[:most].decode(errors="ignore")
    line = start.rfind("\n")
    return start[:line] if line > most // 2 else start


def sh_last(output: str, code: int | None) -> dict[str, Any]:
    """`sh.last` for a `shell` run that printed `output` (stdout and stderr as one stream: a
    command's output is kept so) and ended with `code` (None: it was stopped), at most
    `MOST_SH_LAST` characters of it, its start and its end."""
    if len(output) > MOST_SH_LAST:
        half = MOST_SH_LAST // 2
        left_out = len(output) - 2 * half
        output = f"{output[:half]}\n[... {left_out:,} characters not kept ...]\n{output[-half:]}"
    return {"stdout": output, "stderr": "", "exit": code}
