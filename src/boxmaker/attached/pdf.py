"""A PDF's text, page by page, read by pypdf in a worker process with limits, from trio code.

The one idea to know: pypdf never runs in the calling process. A PDF is a program of sorts
(streams that inflate, page trees, fonts), written by whoever sent it; reading one may take
any time and memory. So `extract_pdf` starts `pdf_worker.py` (`python -I`, stdin the PDF's
bytes, stdout one JSON answer of bounded size, stderr to /dev/null, no file descriptor but
0-2, an empty environment, `/` as its folder), which sets its own address-space and CPU limits
before it imports pypdf, and kills it when the wall-time limit passes. The event loop only
waits on pipes meanwhile, so loopd keeps serving.

What comes back is the text with a marker line before each page's text,

    --- page 1 of 3 ---
    <page 1's text>
    --- page 2 of 3 ---
    (no text on this page)
    ...

at most `max_chars` characters of it (markers included); when the whole is longer, it is cut
there and a last line says so: `--- cut at 40000 characters: 1234 more, from page 7 of 9 on,
are left out ---`. The text is kept beside the file by the caller and never extracted again.
"""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import trio

from .errors import FileRefused

__all__ = ["WORKER", "WorkerLimits", "WorkerOutcome", "extract_pdf", "run_worker", "worker_argv"]

WORKER = Path(__file__).with_name("pdf_worker.py")
_ANSWER_SLACK = 64 * 1024  # bytes of an answer beyond its text: markers, JSON, figures


@attrs.frozen
class WorkerLimits:
    """What one extraction may use. `cpu_s` is a backstop beyond `wall_s` (a worker whose
    caller is gone still ends); the wall time is what the caller waits at most."""

    max_pages: int
    max_chars: int
    wall_s: float
    cpu_s: int
    memory_bytes: int

    @property
    def max_answer(self) -> int:
        """The most bytes an honest worker writes: 4 per character of UTF-8, and the rest."""
        return 4 * self.max_chars + _ANSWER_SLACK

    @property
    def memory(self) -> str:
        """The memory limit as the owner reads it: `256 MiB`."""
        return f"{self.memory_bytes / 2**20:.4g} MiB"

    @property
    def stated(self) -> str:
        """The limits as the owner reads them: `(30 s, 256 MiB)`."""
        return f"({self.wall_s:g} s, {self.memory})"


@attrs.frozen
class WorkerOutcome:
    """How a worker ended: what it wrote (cut at its bound), its exit status (a signal as its
    negative number), whether the wall-time limit ended it and whether it wrote too much."""

    answer: bytes
    returncode: int | None
    timed_out: bool
    too_long: bool


async def extract_pdf(
    data: bytes, *, max_pages: int, max_chars: int, timeout_s: float, memory_bytes: int
) -> str:
    """The text of the PDF `data`, page by page with markers, at most `max_chars` characters
    and a note when cut (the module's docstring shows the format). Read in a worker process
    within `timeout_s` seconds of wall time (and as many of CPU, plus one) and `memory_bytes`
    of address space; the event loop runs on meanwhile. `data` is held whole in both
    processes: the caller bounds it (`[files] max_bytes`).

    Raises:
        FileRefused: the PDF has more than `max_pages` pages; the worker went past a limit
            (time, CPU, memory, or one of pypdf's own on a stream); it is encrypted with a
            password, or damaged, or has no text (a scan); or the worker could not start.
        ValueError: a limit that is not positive.
    """
    if min(max_pages, max_chars, memory_bytes) < 1 or not timeout_s > 0:
        raise ValueError("every limit of a PDF's extraction must be positive")
    limits = WorkerLimits(max_pages, max_chars, timeout_s, math.ceil(timeout_s) + 1, memory_bytes)
    try:
        outcome = await run_worker(worker_argv(limits), data, limits.wall_s, limits.max_answer)
    except* OSError as group:  # the nursery's group, around the one error of its start
        raise FileRefused(f"the PDF reader could not start: {group.exceptions[0]}") from group
    return text_of(outcome, limits)


def worker_argv(limits: WorkerLimits) -> list[str]:
    """The command line of a worker with `limits`: this interpreter, isolated, the script by
    its path (so no import of boxmaker, whichever checkout or wheel this is)."""
    figures = (limits.memory_bytes, limits.cpu_s, limits.max_pages, limits.max_chars)
    return [sys.executable, "-I", str(WORKER), *map(str, figures)]


async def run_worker(argv: list[str], data: bytes, wall_s: float, max_answer: int) -> WorkerOutcome:
    """Run `argv` with `data` on its stdin and take at most `max_answer` bytes of its stdout;
    kill it (SIGKILL) after `wall_s` seconds, or as soon as it writes more. It inherits no
    file descriptor but 0-2 and no environment; its stderr goes nowhere.

    Raises:
        ExceptionGroup[OSError]: it cannot start (from the nursery that runs it).
    """
    answer: bytes | None = b""
    process: trio.Process | None = None
    with trio.move_on_after(wall_s) as scope:
        async with trio.open_nursery() as nursery:
            process = await nursery.start(
                partial(
                    trio.run_process, argv, stdin=data, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, check=False, deliver_cancel=_kill,
                    close_fds=True, env={}, cwd="/",
                )
            )  # fmt: skip
            assert process is not None
            assert process.stdout is not None
            answer = await _bounded(process.stdout, max_answer)
            if answer is None:
                process.kill()
    returncode = process.returncode if process is not None else None
    return WorkerOutcome(answer or b"", returncode, scope.cancelled_caught, answer is None)


async def _kill(process: trio.Process) -> None:
    process.kill()


async def _bounded(stream: trio.abc.ReceiveStream, most: int) -> bytes | None:
    """All `stream` gives until its end, or None once that passes `most` bytes."""
    received = bytearray()
    async with stream:
        while chunk := await stream.receive_some():
            received += chunk
            if len(received) > most:
                return None
    return bytes(received)


def text_of(outcome: WorkerOutcome, limits: WorkerLimits) -> str:
    """The text a worker's `outcome` gives, with the cut note; or the refusal it means.

    Raises:
        FileRefused: as `extract_pdf` says.
    """
    within = f"the PDF could not be read within its limits {limits.stated}"
    if outcome.timed_out:
        raise FileRefused(f"{within}: reading it took longer than {limits.wall_s:g} s")
    if outcome.too_long:
        raise FileRefused(f"the PDF reader wrote more than {limits.max_answer} bytes")
    if outcome.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise FileRefused(f"{within}: it used more than {limits.cpu_s} s of CPU time")
    answer = _parsed(outcome.answer)
    if outcome.returncode != 0 or answer is None:
        raise FileRefused(f"the PDF reader failed (exit status {outcome.returncode})")
    refused, pages = answer.get("refused"), answer.get("pages")
    detail = str(answer.get("detail", ""))[:200]
    if refused == "pages":
        raise FileRefused(f"the PDF has {pages} pages; [files] max_pdf_pages is {limits.max_pages}")
    if refused == "memory":
        raise FileRefused(f"{within}: it needed more than {limits.memory}")
    if refused == "cpu":
        raise FileRefused(f"{within}: it used more than {limits.cpu_s} s of CPU time")
    if refused == "start":
        raise FileRefused(f"{within}: the reader could not start in {limits.memory} ({detail})")
    if refused == "worker":
        raise FileRefused(f"the PDF reader failed ({detail})")
    if refused == "limit":
        raise FileRefused(f"{within}: one of its streams is too large to read ({detail})")
    if refused == "encrypted":
        raise FileRefused("the PDF is encrypted with a password; attach a copy without one")
    if refused == "unreadable":
        raise FileRefused(f"the file is not a readable PDF ({detail})")
    if refused == "no_text":
        raise FileRefused(
            f"the PDF has no text on any of its {pages} pages: it is likely a scan (pictures "
            "of pages); attach it as images, or a copy with a text layer (OCR)"
        )
    return _shown(answer, limits)


def _parsed(answer: bytes) -> dict[str, Any] | None:
    try:
        found = json.loads(answer)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _shown(answer: dict[str, Any], limits: WorkerLimits) -> str:
    text, chars, pages, cut_page = (answer.get(k) for k in ("text", "chars", "pages", "cut_page"))
    if not (
        isinstance(text, str) and isinstance(chars, int) and isinstance(pages, int)
        and len(text) <= limits.max_chars and chars >= len(text) and pages > 0
    ):  # fmt: skip
        raise FileRefused("the PDF reader's answer is not one it gives")
    if chars == len(text):
        return text
    where = f"from page {cut_page} of {pages} on" if isinstance(cut_page, int) else "at the end"
    end = "" if text.endswith("\n") else "\n"
    return (
        f"{text}{end}--- cut at {limits.max_chars} characters: {chars - len(text)} more, "
        f"{where}, are left out ---\n"
    )
