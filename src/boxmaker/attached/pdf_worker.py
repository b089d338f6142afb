"""The PDF worker: a PDF's bytes on stdin, one JSON answer on stdout, pypdf run under limits.

`pdf.py` starts it as `python -I pdf_worker.py MEMORY_BYTES CPU_SECONDS MAX_PAGES MAX_CHARS`,
by its path: `-I` leaves out the environment, the user's site and the script's folder, so the
worker imports nothing of boxmaker (the standard library and pypdf only) and is the same
program whichever checkout or wheel started it.

The strategy, in order: set the limits first (address space, CPU time, no core file, no file
written), with nothing imported but a few standard modules, so pypdf's import and everything
after it runs inside them; read stdin whole; import pypdf; seal the process (an audit hook
refuses every open outside Python's own code, every socket, process and file change); then
read the PDF. Every failure is an answer, never a traceback: a `MemoryError` (the address
space is full) is caught where the stack has unwound and little is held, and answered with
bytes made before the limits; the soft CPU limit's SIGXCPU becomes an answer too, and the hard
limit a second later kills a worker stuck in C.

Answers (one JSON object, and nothing else, on stdout):
    {"pages": n, "text": "...", "chars": total, "cut_page": p or null}
    {"refused": "pages" | "no_text", "pages": n}
    {"refused": "encrypted" | "unreadable" | "limit" | "start" | "worker", "detail": "..."}
    {"refused": "memory"} | {"refused": "cpu"}
`text` is the first MAX_CHARS characters of the pages' text with a marker line before each
page, `--- page 3 of 12 ---` (a page with no text says `(no text on this page)`); `chars` is
the length of the whole, so the caller can say how much was left out, and `cut_page` the first
page not shown whole.
"""

from __future__ import annotations

import io
import json
import os
import resource
import signal
import sys
from typing import Any

MEMORY_ANSWER = b'{"refused": "memory"}'
CPU_ANSWER = b'{"refused": "cpu"}'
NO_TEXT_ON_PAGE = "(no text on this page)"
_CONTROLS = dict.fromkeys([*range(0x09), *range(0x0B, 0x20), 0x7F])  # but \t, \n
_WRITES = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_REFUSED_EVENTS = (
    "socket.", "subprocess.", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.system",
    "os.kill", "os.killpg", "os.remove", "os.unlink", "os.rename", "os.rmdir", "os.mkdir",
    "os.chmod", "os.chown", "os.link", "os.symlink", "os.truncate", "os.utime", "os.chdir",
    "os.putenv", "os.unsetenv", "shutil.", "ctypes.", "urllib.", "webbrowser.", "pty.",
    "sqlite3.", "ftplib.", "http.", "smtplib.", "imaplib.", "poplib.", "nntplib.", "telnetlib.",
)  # fmt: skip


class OutOfCpu(BaseException):
    """The soft CPU limit: a BaseException, so no `except Exception` in pypdf swallows it."""


def main(argv: list[str]) -> int:
    memory_bytes, cpu_seconds, max_pages, max_chars = (int(a) for a in argv[1:5])
    limit(memory_bytes, cpu_seconds)
    try:
        found = read(sys.stdin.buffer.read(), max_pages, max_chars)
        answer = json.dumps(found, ensure_ascii=False).encode()
    except MemoryError:
        answer = MEMORY_ANSWER
    except OutOfCpu:
        answer = CPU_ANSWER
    except Exception as error:  # the worker's own failure, not the PDF's: said, not a traceback
        answer = json.dumps({"refused": "worker", "detail": _said(error)}).encode()
    view = memoryview(answer)
    while view:
        view = view[os.write(1, view) :]
    return 0


def limit(memory_bytes: int, cpu_seconds: int) -> None:
    """This process's limits, before anything large is loaded: `memory_bytes` of address
    space, `cpu_seconds` of CPU (then SIGXCPU, and SIGKILL a second later), no core file, no
    byte written to any file. A hard limit lower than asked stays."""
    for which, soft, hard in (
        (resource.RLIMIT_AS, memory_bytes, memory_bytes),
        (resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_FSIZE, 0, 0),
    ):
        _, current = resource.getrlimit(which)
        top = hard if current == resource.RLIM_INFINITY else min(hard, current)
        resource.setrlimit(which, (min(soft, top), top))
    signal.signal(signal.SIGXCPU, _out_of_cpu)


def _out_of_cpu(signum: int, frame: object) -> None:
    raise OutOfCpu


def seal() -> None:
    """From now on this process opens nothing but Python's own code (a module imported late,
    read-only, from a folder of `sys.path`), and makes no socket, process or change to a file:
    an audit hook that refuses the rest, which cannot be taken back."""
    roots = tuple(os.path.join(os.path.realpath(p), "") for p in sys.path if p and os.path.isdir(p))

    def refuse(event: str, args: tuple[Any, ...]) -> None:
        if event.startswith(_REFUSED_EVENTS):
            raise PermissionError(f"the PDF worker may not {event}")
        if event == "open":
            path, mode, flags = args
            writes = any(c in (mode or "") for c in "wax+") or (flags or 0) & _WRITES
            if not isinstance(path, str | bytes) or writes or not _under(path, roots):
                raise PermissionError(f"the PDF worker may not open {path!r}")
        elif event in ("os.listdir", "os.scandir") and not _under(args[0] or ".", roots):
            raise PermissionError(f"the PDF worker may not list {args[0]!r}")

    sys.addaudithook(refuse)


def _under(path: str | bytes, roots: tuple[str, ...]) -> bool:
    real = os.path.realpath(os.fsdecode(path))
    return os.path.join(real, "").startswith(roots)


def read(data: bytes, max_pages: int, max_chars: int) -> dict[str, Any]:
    """The answer for the PDF `data` (see the module's docstring)."""
    try:  # under the limits, and before the seal: its modules are read here
        import pypdf
        from pypdf.errors import LimitReachedError
    except Exception as error:  # under a tight address space: a library's mapping refused
        # (ImportError), a C extension that could not allocate (SystemError, MemoryError's
        # cousin): pypdf is there, so any failure here is the limit's
        return {"refused": "start", "detail": _said(error)}

    pypdf.overwrite_configuration(jbig2dec_binary=None)  # never a program of the system
    seal()
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not _opened(reader):
            return {"refused": "encrypted", "detail": "it is encrypted with a password"}
        pages = len(reader.pages)
        if pages > max_pages:
            return {"refused": "pages", "pages": pages}
        if pages == 0:
            return {"refused": "unreadable", "detail": "it has no pages"}
        return _text(reader, pages, max_chars)
    except (MemoryError, OutOfCpu):
        raise
    except LimitReachedError as error:
        return {"refused": "limit", "detail": str(error)[:200]}
    except Exception as error:  # a damaged file fails anywhere in pypdf, in any way
        return {"refused": "unreadable", "detail": _said(error)}


def _said(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:200]


def _opened(reader: Any) -> bool:
    """Whether an encrypted PDF opens with the empty password, as it does when only its
    owner's permissions are protected (every viewer shows it)."""
    try:
        return bool(reader.decrypt(""))
    except (MemoryError, OutOfCpu):
        raise
    except Exception:  # an unknown scheme, or AES with no `cryptography` to read it
        return False


def _text(reader: Any, pages: int, max_chars: int) -> dict[str, Any]:
    kept: list[str] = []
    room, total, any_text, cut_page = max_chars, 0, False, None
    for number, page in enumerate(reader.pages, 1):
        text = _clean(page.extract_text())
        any_text = any_text or bool(text.strip())
        if text and not text.endswith("\n"):
            text += "\n"
        piece = f"--- page {number} of {pages} ---\n{text or NO_TEXT_ON_PAGE + chr(10)}"
        total += len(piece)
        if len(piece) > room and cut_page is None:
            cut_page = number
        kept.append(piece[:room])
        room -= len(kept[-1])
    if not any_text:
        return {"refused": "no_text", "pages": pages}
    return {"pages": pages, "text": "".join(kept), "chars": total, "cut_page": cut_page}


def _clean(text: str) -> str:
    """`text` as plain lines: CR and CRLF as LF, controls but tab and LF dropped, and a lone
    surrogate (which no UTF-8 can carry) as "?"."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").translate(_CONTROLS)
    return text.encode("utf-8", "replace").decode("utf-8")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
