"""Shared test settings.

Hypothesis runs derandomized by default, so `make test` gives the same examples on every run
and machine (no luck); `HYPOTHESIS_PROFILE=soak` explores many more, randomly, and prints the
seed and blob that reproduce a failure. No hypothesis deadlines: timing is not behaviour.

Every async test runs under a watchdog of real time (`DEADLINE_S`), whatever its clock: a test
that waits for something that never comes fails, saying where each of its tasks was waiting,
instead of hanging the suite. Tests that wait on something in particular also set their own
`trio.fail_after`, so a regression there fails in seconds and names what it waited for.
"""

from __future__ import annotations

import functools
import inspect
import linecache
import os
import threading
from collections.abc import Callable, Coroutine, Generator
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, Phase, settings

from .soak import SOAK

DEADLINE_S = float(os.environ.get("BOXMAKER_TEST_DEADLINE_S", 3600.0 if SOAK else 120.0))

settings.register_profile(
    "default", deadline=None, derandomize=True, print_blob=True, max_examples=100
)
settings.register_profile(
    "soak",
    deadline=None,
    print_blob=True,
    max_examples=5000,
    suppress_health_check=[HealthCheck.too_slow],
)
# For seeing a check fail on purpose: report the first failure without minutes of shrinking.
settings.register_profile(
    "noshrink", deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--device",
        action="store_true",
        help="run the tests in tests/device, which need the real llama-server (make llama-server)",
    )
    parser.addoption(
        "--gateway",
        action="store_true",
        help="run the tests in tests/gateway, which need a real Matrix homeserver (make synapse)",
    )


def where_tasks_wait() -> str:
    """Each task of this run and the line it is waiting at."""
    lines: list[str] = []

    def walk(task: trio.lowlevel.Task, depth: int) -> None:
        # The deepest frame of the project's own code: the await the task is stuck at.
        ours = [
            (frame.f_code.co_filename, lineno)
            for frame, lineno in task.iter_await_frames()
            if "site-packages" not in frame.f_code.co_filename
        ]
        where = "(in a library)"
        if ours:
            filename, lineno = ours[-1]
            code = linecache.getline(filename, lineno).strip()
            where = f"{Path(filename).name}:{lineno}: {code}"
        lines.append(f"{'  ' * depth}{task.name}: {where}")
        for nursery in task.child_nurseries:
            for child in nursery.child_tasks:
                walk(child, depth + 1)

    walk(trio.lowlevel.current_root_task(), 0)
    return "\n".join(lines)


def with_deadline(
    test: Callable[..., Coroutine[Any, Any, Any]], seconds: float
) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(test)
    async def run(*args: Any, **kwargs: Any) -> Any:
        token = trio.lowlevel.current_trio_token()
        waiting: list[str] = []
        with trio.CancelScope() as scope:

            def expire() -> None:
                waiting.append(where_tasks_wait())
                scope.cancel()

            timer = threading.Timer(seconds, token.run_sync_soon, (expire,))
            timer.daemon = True
            timer.start()
            try:
                return await test(*args, **kwargs)
            finally:
                timer.cancel()
        pytest.fail(f"not done within {seconds:g} s of real time; the tasks waited at:\n"
                    + "".join(waiting), pytrace=False)  # fmt: skip

    return run


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """Put every async test under the watchdog, before pytest-trio wraps it to run."""
    obj = getattr(item, "obj", None)
    inner = getattr(getattr(obj, "hypothesis", None), "inner_test", None)
    if inner is not None and _is_async(inner):
        obj.hypothesis.inner_test = with_deadline(inner, DEADLINE_S)  # type: ignore[union-attr]
    elif obj is not None and _is_async(obj):
        item.obj = with_deadline(obj, DEADLINE_S)  # type: ignore[attr-defined]
    yield


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) and not getattr(fn, "_trio_test_runner_wrapped", False)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/device and tests/gateway are separate tiers (`make verify-device`, `make
    verify-gateway`): the main suite never needs the real llama-server or a real homeserver."""
    if "device" in collection_path.parts and not config.getoption("--device"):
        return True
    if "gateway" in collection_path.parts and not config.getoption("--gateway"):
        return True
    return None


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The reliability tests' counts and outcomes (tests/soak.py), when any ran."""
    from .soak import COUNTS, NOTES, SOAK

    if not COUNTS and not NOTES:
        return
    terminalreporter.section(f"reliability counts ({'soak' if SOAK else 'quick'})")
    for what, outcomes in sorted(COUNTS.items()):
        parts = ", ".join(f"{outcome} {n:,}" for outcome, n in sorted(outcomes.items()))
        terminalreporter.write_line(f"{what}: {sum(outcomes.values()):,} ({parts})")
    for line in NOTES:
        terminalreporter.write_line(line)
