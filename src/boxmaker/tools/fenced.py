"""The fenced tool mode: tool calls a model writes in its text, as tool blocks. Pure.

A tool-weak model (one whose chat template has no tool calls, or that never makes them) is
told about its tools in the system message and shown a few example exchanges; it then asks
for a tool by writing a block in its answer:

    ```tool
    {"name": "echo", "arguments": {"text": "hi"}}
    ```

The answer is recorded exactly as the server returned it; `parse_blocks` reads the blocks out
of it as numbered calls (`fenced-1`, `fenced-2`, ... within one answer), so the same text
always gives the same calls, on every replay. Everything in a block is the model's and is
checked: its size, its nesting, that it is a JSON object naming one of the session's tools
with an object of arguments. A block that fails any check is still a call, with the
`problem` the model is told instead of a result. `FenceFilter` keeps a block's text off the
screen while the answer streams.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from typing import Any

from attrs import frozen

from ..proto import DecodeError, ToolCall, ToolSchema, encode, parse_json

__all__ = [
    "CLOSE",
    "MAX_BLOCKS",
    "MAX_BLOCK_BYTES",
    "MAX_DEPTH",
    "OPEN",
    "BlockCall",
    "FenceFilter",
    "PhraseFilter",
    "block_text",
    "parse_blocks",
    "problem_texts",
    "tool_section",
]

OPEN = "```tool"
CLOSE = "```"
MAX_BLOCKS = 8  # blocks read from one answer; one more call says the rest were not
MAX_BLOCK_BYTES = 16384  # of a block's text
MAX_DEPTH = 16  # of arrays and objects nested in a block
# What the model is told of a block that cannot run: briefly, and in words it has no reason
# to copy into an answer (a small model repeats a long sentence it was told, line after line).
# Every one is known from the session's tools alone, so `problem_texts` can say them all.
_PROBLEMS = (
    "too long",
    f"nested more than {MAX_DEPTH} deep",
    "not valid JSON",
    "not a JSON object",
    "no tool name",
    "the arguments are not an object",
)
_TOO_MANY = f"more than {MAX_BLOCKS} blocks; only the first {MAX_BLOCKS} were read"


# A small model names the parts of a block in other words than it was shown: `{"type":
# "echo", "args": {...}}` is read as the call it means.
_NAMES = ("name", "tool", "function", "type")
_ARGUMENTS = ("arguments", "args", "parameters", "input")


def _not_run(problem: str) -> str:
    return f"(not run: {problem})"


def problem_texts(offered: Sequence[str]) -> tuple[str, ...]:
    """Everything a session with the tools `offered` can be told of a bad block."""
    unknown = f"no such tool; the tools are {', '.join(offered)}"
    return tuple(_not_run(p) for p in (*_PROBLEMS, _TOO_MANY, unknown))


@frozen
class BlockCall(ToolCall):
    """A call read from a tool block. `problem`, when set, is what the model is told instead
    of running it (the block is not JSON, names no tool the session has, ...)."""

    problem: str | None = None


def block_text(name: str, arguments: dict[str, Any]) -> str:
    """A tool block as the model is shown to write one."""
    call = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{OPEN}\n{call}\n{CLOSE}"


def _bodies(text: str) -> list[str]:
    """The text of every block: from an opening fence to the next closing one (or the end of
    the answer, where a model stopped before closing it)."""
    bodies, at = [], 0
    while (start := text.find(OPEN, at)) >= 0:
        start += len(OPEN)
        end = text.find(CLOSE, start)
        bodies.append(text[start : end if end >= 0 else len(text)])
        at = end + len(CLOSE) if end >= 0 else len(text)
    return bodies


def _depth(text: str) -> int:
    """How deep arrays and objects nest in JSON text (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _read(body: str, offered: Sequence[str]) -> tuple[str, str, str | None]:
    """(name, arguments as compact JSON text, problem) of one block's text."""
    raw = body.strip()
    size = len(raw.encode())
    if size > MAX_BLOCK_BYTES:
        return "", raw[:MAX_BLOCK_BYTES], "too long"
    if _depth(raw) > MAX_DEPTH:
        return "", raw, f"nested more than {MAX_DEPTH} deep"
    try:
        value = parse_json(raw)
    except DecodeError:
        return "", raw, "not valid JSON"
    if not isinstance(value, dict):
        return "", raw, "not a JSON object"
    name = next((n for key in _NAMES if isinstance(n := value.get(key), str) and n), None)
    if name is None:
        return "", raw, "no tool name"
    arguments: Any = next((value[key] for key in _ARGUMENTS if key in value), {})
    if isinstance(arguments, str):  # arguments written as JSON text
        with contextlib.suppress(DecodeError):
            arguments = parse_json(arguments or "{}")
    if not isinstance(arguments, dict):
        return name, raw, "the arguments are not an object"
    known = [tool for tool in offered if tool.casefold() == name.casefold()]
    if name not in offered and len(known) != 1:
        return name, raw, f"no such tool; the tools are {', '.join(offered)}"
    return (name if name in offered else known[0]), encode(arguments).decode(), None


def parse_blocks(text: str | None, offered: Sequence[str]) -> list[BlockCall]:
    """Every tool block of an answer, in order, as calls `fenced-1`, `fenced-2`, ...; a block
    that cannot run carries its `problem`. At most `MAX_BLOCKS` are read; if there were more,
    one call more says so. Never raises."""
    bodies = _bodies(text or "")
    calls = []
    for number, body in enumerate(bodies[:MAX_BLOCKS], start=1):
        name, arguments, problem = _read(body, offered)
        if problem is not None:
            problem = _not_run(problem)
        calls.append(BlockCall(f"fenced-{number}", name or "tool block", arguments, problem))
    if len(bodies) > MAX_BLOCKS:
        problem = _not_run(_TOO_MANY)
        calls.append(BlockCall(f"fenced-{MAX_BLOCKS + 1}", "tool block", "", problem))
    return calls


def _arguments(schema: ToolSchema) -> str:
    properties = schema.parameters.get("properties")
    if not isinstance(properties, dict) or not properties:
        return "none"
    required = schema.parameters.get("required") or []
    parts = []
    for name, spec in properties.items():
        spec = spec if isinstance(spec, dict) else {}
        kind = str(spec.get("type", "any")) + (", required" if name in required else "")
        described = f": {spec['description']}" if spec.get("description") else ""
        parts.append(f"{name} ({kind}){described}")
    return "; ".join(parts)


def tool_section(tools: Sequence[ToolSchema], results: str, prefix: str) -> str:
    """The system message's part on tools, for a fenced session: how to write a tool block,
    each tool with its arguments, and how the result comes back."""
    first = tools[0]
    required = first.parameters.get("required") or []
    example = block_text(first.name, {name: f"<{name}>" for name in required})
    lines = [
        "## Tools",
        "",
        "To use a tool, answer with only a tool block: a JSON object with the tool's name and "
        f"its arguments, between {OPEN} and {CLOSE}. For example:",
        "",
        example,
        "",
        "The tools:",
        *(f"- {t.name}: {t.description} Arguments: {_arguments(t).rstrip('.')}." for t in tools),
        "",
    ]
    opening = prefix.strip().splitlines()[0] if prefix.strip() else ""
    if results == "user" and opening:
        lines.append(
            f'The result comes back in a message that starts with "{opening}". Then answer.'
        )
    elif results == "user":
        lines.append("The result comes back in the next message. Then answer.")
    else:
        lines.append("The result comes back as a tool message. Then answer.")
    return "\n".join(lines)


class FenceFilter:
    """The visible part of an answer's text as it streams: everything but its tool blocks.

    `feed` takes each piece of text and returns what may be shown now; a piece that could be
    the start of a fence is held until the next one says (a block's text never shows, not
    even its first backtick). `flush` gives what is held at the end of the answer.
    """

    def __init__(self) -> None:
        self._held = ""  # text not shown yet: a possible fence, or the inside of a block
        self._inside = False

    def feed(self, text: str) -> str:
        shown: list[str] = []
        self._held += text
        while self._held:
            if self._inside:
                end = self._held.find(CLOSE)
                if end < 0:
                    self._held = self._held[-(len(CLOSE) - 1) :]  # a closing fence may be cut
                    break
                self._held = self._held[end + len(CLOSE) :]
                self._inside = False
                continue
            start = self._held.find(OPEN)
            if start >= 0:
                shown.append(self._held[:start])
                self._held = self._held[start + len(OPEN) :]
                self._inside = True
                continue
            keep = _partial_fence(self._held)
            shown.append(self._held[: len(self._held) - keep])
            self._held = self._held[len(self._held) - keep :]
            break
        return "".join(shown)

    def flush(self) -> str:
        """What was held back at the end of the answer (never a block's text)."""
        held, self._held = ("" if self._inside else self._held), ""
        self._inside = False
        return held

    def reset(self) -> None:
        """A new attempt starts: forget what the failed one held."""
        self._held, self._inside = "", False


def _fold(text: str) -> str:
    """`text` in lower case, a character for a character (so that places in it are places in
    `text`): the few whose lower case is longer stay as they are."""
    lower = text.lower()
    if len(lower) == len(text):
        return lower
    return "".join(c if len(low := c.lower()) != 1 else low for c in text)


def _partial_fence(text: str) -> int:
    """The length of the longest end of `text` that is a start of the opening fence."""
    for size in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-size:]):
            return size
    return 0


class PhraseFilter:
    """Text as it streams with given phrases taken out, in any case: loopd's own words to the
    model (a tool result's frame, a note that a call was not run), which a small model copies
    into its answer, sometimes with its first letter changed. `feed` returns what may be shown
    now; an end of the text that could be the start of a phrase is held until the next piece
    says (a phrase never shows, not even its first characters). `flush` gives what is held at
    the end."""

    def __init__(self, phrases: Sequence[str]) -> None:
        self._phrases = tuple(sorted({_fold(p) for p in phrases if p}, key=len, reverse=True))
        self._held = ""

    def feed(self, text: str) -> str:
        self._held += text
        shown: list[str] = []
        while self._held:
            folded = _fold(self._held)
            found = min(  # the first to start; of two there, the longer
                ((at, phrase) for phrase in self._phrases if (at := folded.find(phrase)) >= 0),
                key=lambda found: (found[0], -len(found[1])),
                default=None,
            )
            if found is not None:
                at, phrase = found
                shown.append(self._held[:at])
                self._held = self._held[at + len(phrase) :]
                continue
            keep = self._partial(folded)
            shown.append(self._held[: len(self._held) - keep])
            self._held = self._held[len(self._held) - keep :]
            break
        return "".join(shown)

    def _partial(self, folded: str) -> int:
        """The length of the longest end of the held text that starts a phrase."""
        best = 0
        for phrase in self._phrases:
            for size in range(min(len(phrase) - 1, len(folded)), best, -1):
                if phrase.startswith(folded[-size:]):
                    best = size
                    break
        return best

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def reset(self) -> None:
        self._held = ""
