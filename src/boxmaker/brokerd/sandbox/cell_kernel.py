"""The interpreter side of `run_cell`: run by the system's `python3 -I -u -c <this text>` inside
the sandbox (the standard library only; nothing of Boxmaker's is importable there).

Each request is one line of JSON on stdin, `{"code": str, "nonce": str}`. The cell runs in one
namespace kept from cell to cell; what it prints (Python's own streams and its child
processes', stdout and stderr as one) goes to stdout as it comes; then the end of the cell:
`\\0bx-done <nonce> <length>\\n` and `length` bytes of JSON, `{"value": repr or null,
"error": traceback or null}`. The nonce is brokerd's, new for each cell, so no output can
end a cell early by printing the marker of another. Stdin is /dev/null for the cell's code.
"""

import ast
import json
import linecache
import os
import sys
import traceback

MOST_REPR = 20_000  # characters of a value's repr
MOST_FRAMES = 5  # of a traceback, the last


def _write(data: bytes) -> None:
    while data:
        data = data[os.write(1, data) :]


def _run(code: str, name: str, namespace: dict[str, object]) -> tuple[str | None, str | None]:
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        tree = ast.parse(code, name)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, name, "exec"), namespace)
        if not isinstance(last, ast.Expr):
            return None, None
        value = eval(compile(ast.Expression(last.value), name, "eval"), namespace)
        if value is None:
            return None, None
        namespace["_"] = value
        shown = repr(value)
        if len(shown) > MOST_REPR:
            shown = shown[:MOST_REPR] + f"... ({len(shown):,} characters in all)"
        return shown, None
    except BaseException as error:  # SystemExit and KeyboardInterrupt too: the kernel goes on
        tb = error.__traceback__
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell"):
            tb = tb.tb_next  # the kernel's own frames are not the cell's
        lines = traceback.format_exception(type(error), error, tb, limit=-MOST_FRAMES)
        if tb is None:  # a syntax error: no frame of the cell
            lines = traceback.format_exception_only(type(error), error)
        return None, "".join(lines)


def main() -> None:
    control = os.fdopen(os.dup(0), "rb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(1, 2)  # one stream, in the order it was written
    sys.stdin = open(os.devnull)  # noqa: SIM115
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    for number, line in enumerate(control, 1):
        request = json.loads(line)
        value, error = _run(request["code"], f"<cell {number}>", namespace)
        sys.stdout.flush()
        sys.stderr.flush()
        done = json.dumps({"value": value, "error": error}).encode()
        _write(b"\0bx-done %s %d\n" % (request["nonce"].encode(), len(done)) + done)


if __name__ == "__main__":
    main()
