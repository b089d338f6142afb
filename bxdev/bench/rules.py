"""The shell rules row: what judging one `shell` line against the policy's prefix rules costs
brokerd (issue 41): tree-sitter-bash's parse, the walk over every command the line may run,
the wrappers and `sh -c` texts followed, and the rules' decision. Typical lines a model writes,
and the worst shapes of the largest line brokerd reads (64 KiB), which it judges on a worker
thread so that its event loop goes on.
"""

from __future__ import annotations

import time

import trio

from boxmaker.brokerd import Decision
from boxmaker.brokerd.policy.commands import PrefixRule, decide_command

from .report import Row
from .stats import spread

__all__ = ["run"]

BAR_MS = 1.0  # a typical line, median
RULES = (
    PrefixRule(("git", "push"), Decision.ASK),
    PrefixRule(("git", "status"), Decision.ALLOW),
    PrefixRule(("rm",), Decision.DENY),
    PrefixRule(("ls",), Decision.ALLOW),
)
TYPICAL = (
    "ls -la",
    "git status && git diff --stat",
    "grep -rn 'def main' src | head -20",
    "find . -name '*.py' -exec wc -l {} + | sort -n | tail -5",
    "cd build && make -j2 2>&1 | tail -30",
    "python3 -c 'import sys; print(sys.version)'",
    'for f in *.md; do echo "$f"; wc -w "$f"; done',
    "cat <<'EOF' > notes.txt\nfirst line\nsecond line\nEOF",
)
WORST = {
    "65,000 braces": "ls " + "{" * 65000,
    "20,000 commands": "ls;" * 20000,
    "3,000 sh -c texts": "sh -c 'sh -c \"ls\"';" * 3000,
    "8 nested sh -c texts of 64 KiB": "sh -c " + "sh\\ -c\\ " * 8000 + "{" * 1000,
    "13,000 wrappers": "nice " * 13000,
}


async def run(*, runs: int) -> Row:
    typical, worst = await trio.to_thread.run_sync(_measure, runs)
    median = spread(typical).median
    slowest = max(worst.values())
    details = (
        f"{len(TYPICAL)} typical lines (a listing, git, a pipeline, `find -exec`, a loop, a "
        f"heredoc), each judged {runs} times against {len(RULES)} rules: median "
        f"{median * 1000:.3f} ms a line (max {max(typical) * 1000:.3f}).",
        "The worst shapes of a 64 KiB line (each once): "
        + "; ".join(f"{name} {seconds * 1000:,.0f} ms" for name, seconds in worst.items())
        + ". brokerd judges a line on a worker thread: its event loop goes on meanwhile.",
    )
    return Row(
        figure="shell rules",
        result=f"{median * 1000:.3f} ms a typical line; {slowest * 1000:,.0f} ms at worst",
        bar=f"≤ {BAR_MS:g} ms a typical line",
        met=median * 1000 <= BAR_MS,
        details=details,
    )


def _measure(runs: int) -> tuple[list[float], dict[str, float]]:
    typical = []
    for _ in range(runs):
        for line in TYPICAL:
            started = time.perf_counter()
            decide_command(RULES, Decision.ASK, line)
            typical.append(time.perf_counter() - started)
    worst = {}
    for name, line in WORST.items():
        started = time.perf_counter()
        decide_command(RULES, Decision.ASK, line)
        worst[name] = time.perf_counter() - started
    return typical, worst
