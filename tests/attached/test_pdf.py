"""A PDF's text, read in a worker process: the page markers, the cut, and every refusal in
words, each limit (pages, wall time, CPU time, memory, the answer's size) seen to hold on a
real PDF that would go past it, while the caller's event loop runs on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from functools import partial
from pathlib import Path

import pytest
import trio

from boxmaker.attached import FileRefused, extract_pdf
from boxmaker.attached.pdf import WorkerLimits, run_worker, text_of, worker_argv

from .pdfs import cpu_heavy, drawn, encrypted, inflating, memory_bomb, raw_pdf, written

MiB = 2**20
LIMITS = {"max_pages": 40, "max_chars": 100_000, "timeout_s": 60.0, "memory_bytes": 512 * MiB}
THREE_PAGES = ["Page one says apples.", "Page two says bananas.\nAnd a second line.", "Page three."]
THREE_PAGES_TEXT = (
    "--- page 1 of 3 ---\nPage one says apples.\n"
    "--- page 2 of 3 ---\nPage two says bananas.\nAnd a second line.\n"
    "--- page 3 of 3 ---\nPage three.\n"
)


async def extracted(data: bytes, **limits: float) -> str:
    with trio.fail_after(90):
        return await extract_pdf(data, **{**LIMITS, **limits})  # type: ignore[arg-type]


async def refusal(data: bytes, **limits: float) -> str:
    with pytest.raises(FileRefused) as refused:
        await extracted(data, **limits)
    return str(refused.value)


async def test_each_page_s_text_follows_its_marker() -> None:
    assert await extracted(written(THREE_PAGES)) == THREE_PAGES_TEXT


async def test_a_page_without_text_says_so_among_pages_with_text() -> None:
    data = raw_pdf([b"BT /F1 12 Tf 72 700 Td (Words) Tj ET", b"0 0 10 10 re f"])
    text = await extracted(data)
    assert text == "--- page 1 of 2 ---\nWords\n--- page 2 of 2 ---\n(no text on this page)\n"


async def test_more_pages_than_max_pages_is_refused_naming_the_limit() -> None:
    data = written(["a", "b", "c", "d", "e"])
    assert await refusal(data, max_pages=4) == "the PDF has 5 pages; [files] max_pdf_pages is 4"
    assert (await extracted(data, max_pages=5)).startswith("--- page 1 of 5 ---\na\n")


async def test_a_text_longer_than_max_chars_is_cut_with_a_note_of_what_is_left_out() -> None:
    data = written(THREE_PAGES)
    whole = len(THREE_PAGES_TEXT)
    assert await extracted(data, max_chars=whole) == THREE_PAGES_TEXT
    assert await extracted(data, max_chars=whole - 1) == (
        THREE_PAGES_TEXT[:-1] + "\n--- cut at 135 characters: 1 more, from page 3 of 3 on, "
        "are left out ---\n"
    )
    assert await extracted(data, max_chars=30) == (
        "--- page 1 of 3 ---\nPage one s\n"
        f"--- cut at 30 characters: {whole - 30} more, from page 1 of 3 on, are left out ---\n"
    )
    at_a_page = len("--- page 1 of 3 ---\nPage one says apples.\n")
    assert (await extracted(data, max_chars=at_a_page)).endswith(
        "apples.\n--- cut at 42 characters: 94 more, from page 2 of 3 on, are left out ---\n"
    )


async def test_a_damaged_pdf_is_refused_as_unreadable() -> None:
    good = written(THREE_PAGES)
    damaged = good[:200] + b"x" * (len(good) - 250) + good[-50:]
    assert (await refusal(damaged)).startswith("the file is not a readable PDF (")
    assert (await refusal(b"%PDF-1.7 and nothing else")).startswith(
        "the file is not a readable PDF ("
    )


async def test_a_pdf_encrypted_with_a_password_is_refused() -> None:
    refused = await refusal(encrypted("secret words", user_password="user"))
    assert refused == "the PDF is encrypted with a password; attach a copy without one"


async def test_a_pdf_that_only_protects_its_owner_s_permissions_is_read() -> None:
    text = await extracted(encrypted("open words", user_password=None))
    assert text == "--- page 1 of 1 ---\nopen words\n"


async def test_a_pdf_without_any_text_is_refused_as_a_scan() -> None:
    assert await refusal(drawn(2)) == (
        "the PDF has no text on any of its 2 pages: it is likely a scan (pictures of pages); "
        "attach it as images, or a copy with a text layer (OCR)"
    )


async def test_a_pdf_needing_more_memory_than_its_limit_is_refused() -> None:
    # 330 MB of objects against 128 MiB of address space: the worker's MemoryError, answered.
    assert await refusal(memory_bomb(), memory_bytes=128 * MiB) == (
        "the PDF could not be read within its limits (60 s, 128 MiB): it needed more than 128 MiB"
    )


async def test_a_stream_past_pypdf_s_own_bound_is_refused_as_a_limit() -> None:
    assert (await refusal(inflating())).startswith(
        "the PDF could not be read within its limits (60 s, 512 MiB): one of its streams is too "
        "large to read (Limit reached while decompressing."
    )


@pytest.mark.parametrize("mib", [1, 16, 24, 32, 40])
async def test_a_memory_limit_too_tight_for_the_reader_itself_is_a_refusal(mib: int) -> None:
    # Whether pypdf's import fails as a MemoryError or as a library that cannot be mapped
    # (an ImportError) depends on the machine; either is said as the limit, never a traceback.
    refused = await refusal(written(["a"]), memory_bytes=mib * MiB)
    assert refused.startswith(f"the PDF could not be read within its limits (60 s, {mib} MiB): ")


async def test_a_pdf_taking_longer_than_its_wall_time_is_refused_and_the_loop_runs_on() -> None:
    # 140 s of CPU cannot fit in 1 s on any machine: the wall-time limit ends it (the CPU
    # limit, 2 s, would say otherwise). Meanwhile another task ticks every 10 ms.
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await trio.sleep(0.01)
            ticks += 1

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        refused = await refusal(cpu_heavy(), timeout_s=1, memory_bytes=1024 * MiB)
        nursery.cancel_scope.cancel()
    assert refused == (
        "the PDF could not be read within its limits (1 s, 1024 MiB): reading it took longer "
        "than 1 s"
    )
    assert ticks >= 10  # a loop held by the extraction would tick once, at its end


async def test_a_cancelled_extraction_leaves_no_worker_behind() -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(extract_pdf, cpu_heavy(), **LIMITS))  # type: ignore[arg-type]
            while not our_workers():  # noqa: ASYNC110 (polling /proc: nothing to wait on)
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
    assert our_workers() == []


def our_workers() -> list[int]:
    """The pids of this process's children that run the PDF worker."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"pdf_worker.py" in command:
            found.append(int(entry.name))
    return found


async def test_a_worker_past_its_cpu_limit_is_ended_and_refused() -> None:
    # The backstop for a worker whose caller is gone: 1 s of CPU against a wall limit of 60 s.
    limits = WorkerLimits(max_pages=40, max_chars=1000, wall_s=60, cpu_s=1, memory_bytes=1 << 30)
    with trio.fail_after(90):
        outcome = await run_worker(worker_argv(limits), cpu_heavy(), 60, limits.max_answer)
    assert not outcome.timed_out
    with pytest.raises(FileRefused) as refused:
        text_of(outcome, limits)
    assert str(refused.value) == (
        "the PDF could not be read within its limits (60 s, 1024 MiB): it used more than 1 s "
        "of CPU time"
    )


async def test_a_worker_writing_more_than_its_bound_is_killed_and_refused() -> None:
    argv = [sys.executable, "-I", "-c", "import sys; sys.stdout.write('x' * 10_000_000)"]
    with trio.fail_after(30):
        outcome = await run_worker(argv, b"", 30, 1000)
    assert outcome.too_long
    assert len(outcome.answer) == 0
    limits = WorkerLimits(max_pages=1, max_chars=1, wall_s=30, cpu_s=31, memory_bytes=1 << 30)
    with pytest.raises(FileRefused, match=r"^the PDF reader wrote more than 65540 bytes$"):
        text_of(outcome, limits)


async def test_the_worker_inherits_no_descriptor_and_no_environment() -> None:
    probe = (
        "import json, os; print(json.dumps("
        "[sorted(os.listdir('/proc/self/fd')), sorted(os.environ), os.getcwd()]))"
    )
    leaked = os.pipe()  # ends a child would inherit, were descriptors not closed
    try:
        for fd in leaked:
            os.set_inheritable(fd, True)
        with trio.fail_after(30):
            outcome = await run_worker([sys.executable, "-I", "-c", probe], b"", 30, 10_000)
    finally:
        for fd in leaked:
            os.close(fd)
    fds, environment, cwd = json.loads(outcome.answer)
    assert fds == ["0", "1", "2", "3"]  # 3: the listing's own, open while it lists
    assert set(environment) <= {"LC_CTYPE"}  # Python's own, when it coerces the C locale
    assert cwd == "/"


def test_pypdf_never_runs_in_the_calling_process() -> None:
    code = textwrap.dedent(
        f"""
        import sys, trio
        from boxmaker.attached import extract_pdf
        data = sys.stdin.buffer.read()
        text = trio.run(lambda: extract_pdf(data, max_pages=5, max_chars=1000, timeout_s=60,
                                            memory_bytes={512 * MiB}))
        print(text.splitlines()[1], "pypdf" in sys.modules)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], input=written(["hello"]), capture_output=True, timeout=60
    )
    assert result.stdout.decode() == "hello False\n", result.stderr.decode()[-2000:]


def test_the_package_loads_no_trio_until_extract_pdf_is_asked_for() -> None:
    code = (
        "import sys, boxmaker.attached as a; print('trio' in sys.modules); a.extract_pdf; "
        "print('trio' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert result.stdout.decode().split() == ["False", "True"], result.stderr.decode()[-2000:]


@pytest.mark.parametrize(
    "limits",
    [{"max_pages": 0}, {"max_chars": 0}, {"timeout_s": 0}, {"memory_bytes": 0}],
)
async def test_a_limit_that_is_not_positive_is_a_caller_s_error(limits: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="positive"):
        await extracted(written(["a"]), **limits)
