"""The PDF worker's own walls, seen from inside a process: once sealed it opens nothing but
Python's code, and makes no socket, process or file; its limits hold whatever asked."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from boxmaker.attached.pdf import WORKER


def inside_the_worker(code: str) -> list[str]:
    """What `code` prints, run after the worker's module is loaded and sealed, in an
    isolated interpreter as the worker is."""
    prelude = textwrap.dedent(
        f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("pdf_worker", {str(WORKER)!r})
        worker = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(worker)
        import pypdf, json, socket, subprocess
        worker.seal()

        def tried(what, action):
            try:
                action()
            except PermissionError as error:
                print(what, "refused")
            else:
                print(what, "done")
        """
    )
    result = subprocess.run(
        [sys.executable, "-I", "-c", prelude + textwrap.dedent(code)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.splitlines()


def test_a_sealed_worker_reads_nothing_but_python_s_own_code() -> None:
    assert inside_the_worker(
        """
        tried("read /etc/hostname", lambda: open("/etc/hostname", "rb").read())
        tried("read /proc/self/environ", lambda: open("/proc/self/environ", "rb").read())
        tried("list /", lambda: __import__("os").listdir("/"))
        tried("write in site-packages", lambda: open(pypdf.__file__ + ".x", "w"))
        tried("import a module not yet loaded", lambda: __import__("email.mime.text"))
        """
    ) == [
        "read /etc/hostname refused",
        "read /proc/self/environ refused",
        "list / refused",
        "write in site-packages refused",
        "import a module not yet loaded done",
    ]


def test_a_sealed_worker_makes_no_socket_process_or_change() -> None:
    assert inside_the_worker(
        """
        tried("socket", lambda: socket.socket())
        tried("process", lambda: subprocess.run(["true"]))
        tried("fork", lambda: __import__("os").fork())
        tried("remove", lambda: __import__("os").remove("/nonexistent"))
        """
    ) == ["socket refused", "process refused", "fork refused", "remove refused"]


def test_the_worker_s_limits_hold_for_what_it_loads() -> None:
    code = f"""
        import importlib.util, resource
        spec = importlib.util.spec_from_file_location("pdf_worker", {str(WORKER)!r})
        worker = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(worker)
        worker.limit(200 * 2**20, 7)
        print(resource.getrlimit(resource.RLIMIT_AS), resource.getrlimit(resource.RLIMIT_CPU),
              resource.getrlimit(resource.RLIMIT_CORE), resource.getrlimit(resource.RLIMIT_FSIZE))
        try:
            bytearray(300 * 2**20)
        except MemoryError:
            print("MemoryError")
    """
    result = subprocess.run(
        [sys.executable, "-I", "-c", textwrap.dedent(code)], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert result.stdout.splitlines() == [
        f"({200 * 2**20}, {200 * 2**20}) (7, 8) (0, 0) (0, 0)",
        "MemoryError",
    ], result.stderr[-2000:]
