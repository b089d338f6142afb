"""The interpreter side of `run_cell`: run by the system's `python3 -I -u -c <this text>` inside
the sandbox (the standard library only; nothing of Boxmaker's is importable there).

Each request is one line of JSON on stdin (`cell_wire.cell_request`). The cell runs in one
namespace kept from cell to cell, one top-level statement at a time (compiled as a REPL
compiles, so a `__future__` import holds for the rest); what it prints (Python's own streams
and its child processes', stdout and stderr as one) goes to stdout as it comes, and after each
statement `\\0bx-cut <nonce>\\n`, so that brokerd can number the outputs (one output: what one
statement printed). Then the end of the cell: `\\0bx-done <nonce> <length>\\n` and `length`
bytes of JSON, `{"value": repr or null, "type": its type's name, "error": traceback or null}`.
The nonce is brokerd's, new for each cell, so no output can end a cell early by printing the
marker of another. Stdin is /dev/null for the cell's code.

Two builtins are the cells' (a cell's own variable of that name hides one; `del` brings it
back): `values`, whose `get(cell, index)` returns what brokerd asked it to keep (an output or
a last value too long for its digest, the text the digest would have shown) while this
interpreter lives, at most `most` characters in all, the oldest dropped first; and `sh`,
whose `last` is the last `shell` output brokerd bound in the session (a dict: `stdout`,
`stderr`, `exit`), or None.
"""

import ast
import builtins
import codeop
import contextlib
import json
import linecache
import os
import sys
import traceback
import types
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any, cast

MOST_REPR = 60_000  # characters of a value's repr (its end's JSON stays under MOST_DONE)
MOST_ERROR = 20_000  # characters of an error's traceback
MOST_FRAMES = 5  # of a traceback, the last
MOST_DROPPED = 4096  # values remembered as dropped, to say so
_KERNEL = globals()  # a frame of the kernel's own runs with these: never shown as the cell's


class NoValue(LookupError):
    """`values.get` of a value that is not held: the message says why."""


class Values:
    """What brokerd kept of this interpreter's cells, by cell name (`<number>@<interpreter>`)
    and index (an output's number, or "last"): `values.get(cell, index)`."""

    def __init__(self) -> None:
        self.interpreter = ""  # this one's name, as brokerd gave it
        self.cells = 0  # run so far
        self.most = 0  # characters held at most
        self._held: OrderedDict[tuple[object, object], str] = OrderedDict()
        self._dropped: OrderedDict[tuple[object, object], None] = OrderedDict()
        self._size = 0

    def __repr__(self) -> str:
        return (
            f"<values: {len(self._held)} kept, {self._size:,} of {self.most:,} characters; "
            "values.get(cell, index) as a cell's digest names it>"
        )

    def keep(self, cell: str, index: object, text: str) -> None:
        key = (cell, index)
        self._size += len(text) - len(self._held.pop(key, ""))
        self._held[key] = text
        while self._size > self.most and self._held:  # the oldest first
            dropped, old = self._held.popitem(last=False)
            self._size -= len(old)
            self._dropped[dropped] = None
            while len(self._dropped) > MOST_DROPPED:
                self._dropped.popitem(last=False)

    def get(self, cell: str, index: object) -> str:
        """The text kept as `index` of `cell` (an output's number, or "last"), as the cell's
        digest named it; NoValue, saying why, for one not held."""
        key = (cell, index)
        if key in self._held:
            return self._held[key]
        call = f"values.get({cell!r}, {index!r})"
        number, at, interpreter = cell.partition("@") if isinstance(cell, str) else ("", "", "")
        if not (at and number.isdigit() and interpreter):
            said = "not a cell's name: use the call a digest's stub names, as \"3@5f0c1a\""
        elif interpreter != self.interpreter:
            said = (
                "gone: the interpreter that kept it has ended (this session's interpreter was "
                "restarted since, and nothing earlier cells kept or defined is in this one); "
                "run what made it again"
            )
        elif key in self._dropped:
            said = (
                f"dropped: values holds at most {self.most:,} characters of this "
                "interpreter's values, and drops the oldest first"
            )
        else:
            said = (
                "no such value: only an output or a last value too long for its cell's "
                "digest is kept, as the index its stub names (an output's number, or "
                f'"last"); this interpreter has run cells 1 to {self.cells}'
            )
        raise NoValue(f"{call}: {said}") from None

    def take(self, request: dict[str, Any]) -> None:
        """A request's part for `values`: its interpreter's name, the most, what to keep."""
        self.cells += 1
        self.interpreter = request["cell"].partition("@")[2]
        self.most = request["most"]
        for cell, index, text in request.get("keep", []):
            self.keep(cell, index, text)


class Shell:
    """`sh.last`: the last `shell` output bound in this interpreter (a dict of `stdout`,
    `stderr` and `exit`), or None: none was run since it started."""

    def __init__(self) -> None:
        self.last: object = None

    def __repr__(self) -> str:
        return f"<sh: sh.last is {'None' if self.last is None else 'the last shell output'}>"


def _write(data: bytes) -> None:
    while data:
        data = data[os.write(1, data) :]


def _cut(nonce: bytes) -> None:
    """One output ends: what the statement printed is written; the marker follows it."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # one the cell put there may not flush: no loss
            stream.flush()
    _write(b"\0bx-cut %s\n" % nonce)


def _run(
    code: str,
    name: str,
    namespace: dict[str, object],
    compiler: Callable[[ast.AST, str, str], types.CodeType],
    cut: Callable[[], None],
) -> tuple[str | None, str | None, str | None]:
    """Run `code`; its last expression's value shown and its type's name (None: it has none,
    or it is None) and its error (None: none)."""
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        tree = ast.parse(code, name)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        for statement in tree.body:
            exec(compiler(ast.Module([statement], []), name, "exec"), namespace)
            cut()
        if not isinstance(last, ast.Expr):
            return None, None, None
        value = eval(compiler(ast.Expression(last.value), name, "eval"), namespace)
        if value is None:
            cut()
            return None, None, None
        namespace["_"] = value
        shown = repr(value)  # what it prints is the last output
        cut()
        if len(shown) > MOST_REPR:
            shown = shown[:MOST_REPR] + f"... ({len(shown):,} characters in all)"
        return shown, type(value).__name__, None
    except BaseException as error:  # SystemExit and KeyboardInterrupt too: the kernel goes on
        cut()
        return None, None, _error(error)


def _error(error: BaseException) -> str:
    """`error` with the last of its frames that are the cell's own (from the first frame of a
    cell on, none of the kernel's); a syntax error of the cell's code, alone."""
    tb = error.__traceback__
    while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
        tb = tb.tb_next  # the kernel's own frames are not the cell's
    if tb is None:  # a syntax error: no frame of the cell
        text = "".join(traceback.format_exception_only(type(error), error))
    else:
        own = [t for t in _frames(tb) if t.tb_frame.f_globals is not _KERNEL]
        tb = None
        for frame in reversed(own):
            tb = types.TracebackType(tb, frame.tb_frame, frame.tb_lasti, frame.tb_lineno)
        lines = traceback.format_exception(type(error), error, tb, limit=-MOST_FRAMES)
        text = "".join(lines)
    if len(text) > MOST_ERROR:
        half = MOST_ERROR // 2
        text = f"{text[:half]}\n[... {len(text) - 2 * half:,} characters ...]\n{text[-half:]}"
    return text


def _frames(tb: types.TracebackType | None) -> list[types.TracebackType]:
    frames = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    return frames


def main() -> None:
    control = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(1, 2)  # one stream, in the order it was written
    sys.stdin = open(os.devnull)  # noqa: SIM115
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    values, sh = Values(), Shell()
    vars(builtins).update(values=values, sh=sh)  # names of every namespace, a cell's too
    compiler = cast(Callable[[ast.AST, str, str], types.CodeType], codeop.Compile())
    for number, line in enumerate(control, 1):
        request = json.loads(line)
        nonce = request["nonce"].encode()
        values.take(request)
        if "sh_last" in request:
            sh.last = request["sh_last"]
        shown, kind, error = _run(
            request["code"], f"<cell {number}>", namespace, compiler, partial(_cut, nonce)
        )
        done = json.dumps({"value": shown, "type": kind, "error": error}).encode()
        _write(b"\0bx-done %s %d\n" % (nonce, len(done)) + done)


if __name__ == "__main__":
    main()
