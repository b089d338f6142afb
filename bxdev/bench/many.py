"""Many sessions on one slot: N sessions (2, 4, 8, 16) interleaved through loopd on
the real server with its defaults for the host-memory prompt cache (`--cache-ram` 8192 MiB,
idle slots cached) and SPEC section 11's `-np 1`: turn 1 of every session, then turn 2, so each
session's second request follows N - 1 requests of the others on the same slot. Then the same
with `[cache] save_dir` (and the server's `--slot-save-path`): loopd restores a session's
saved slot before its request when another session used the slot since.

For each request after a session's first: prompt tokens processed against the tokens new to
the server (as the cache row counts them). A ratio of 1.00 means the server had the session's
prefix (in the slot, its host cache, or restored); where it falls, `cache_loss` says why.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..llama import open_llama_server
from .cache import QUESTIONS, _figures
from .harness import NATIVE, open_loopd, session_log, timed_turn, turn_frame
from .report import Row

__all__ = ["COUNTS", "run"]

COUNTS = (2, 4, 8, 16)
FELL = 1.05  # a request whose ratio is above this processed more than its new tokens
CONFIG = "[inference]\ntemperature = 0.0\nmax_tokens = 32\n" + NATIVE


async def run(root: Path, counts: Sequence[int] = COUNTS, rounds: int = 2) -> Row:
    table = [
        "| server | sessions | requests | mean ratio | worst | fell (ratio > 1.05) | causes |",
        "|---|---|---|---|---|---|---|",
    ]
    means: dict[str, list[float]] = {}
    for label in ("defaults", "saves"):
        saves = root / label / "slots"
        saves.mkdir(parents=True)
        extra = ["--slot-save-path", f"{saves}/"] if label == "saves" else []
        config = CONFIG + (f'[cache]\nsave_dir = "{saves}"\n' if label == "saves" else "")
        async with open_llama_server(root / label / "logs", extra=extra) as server:
            with open_loopd(root / label / "loopd", server.url, config=config) as loopd:
                for n in counts:
                    names = [f"many{n}-{i}" for i in range(n)]
                    for number in range(rounds):
                        for i, name in enumerate(names):
                            text = f"{QUESTIONS[number]} (I am person {i + 1}.)"
                            frame = turn_frame(name, text, resume=number > 0)
                            await timed_turn(loopd.socket, frame)
                    ratio = _measure(loopd.home, names)
                    means.setdefault(label, []).append(ratio.mean)
                    table.append(f"| {label} | {n} | {ratio.row} |")
    details = [
        f"{rounds} turns for each of N sessions through one loopd, interleaved (every "
        "session's turn 1, then every session's turn 2), on the real llama-server with "
        "SmolLM2-135M and `-c 4096 -np 1`: with its defaults otherwise (`--cache-ram 8192`, "
        "idle slots cached), then with `--slot-save-path` and loopd's `[cache] save_dir`. "
        "The counts run one after another on the same server. Per request after a session's "
        "first: prompt tokens processed / tokens new to the server.",
        "",
        *table,
    ]
    result = "; ".join(
        f"{label}: " + ", ".join(f"{n} → {m:.2f}" for n, m in zip(counts, ms, strict=True))
        for label, ms in means.items()
    )
    return Row(
        figure="many sessions on one slot (real server)",
        result=f"mean ratio per N sessions, {result}",
        bar="none set (measured: where the ratio falls)",
        met=True,
        details=tuple(details),
    )


class _Ratio:
    def __init__(self, mean: float, row: str) -> None:
        self.mean, self.row = mean, row


def _measure(home: Path, names: list[str]) -> _Ratio:
    ratios: list[float] = []
    fell: list[str] = []
    causes: Counter[str] = Counter()
    for name in names:
        log = session_log(home, name)
        usages = [r for r in log if r["type"] == "usage"]
        for number, (processed, new) in enumerate(_figures(usages), 2):
            ratios.append(processed / new)
            if processed / new > FELL:
                fell.append(f"{name} #{number}: {processed}/{new}")
        causes.update(str(r.get("cause")) for r in log if r["type"] == "cache_loss")
    mean = statistics.fmean(ratios)
    counted = ", ".join(f"{c} {k}" for c, k in sorted(causes.items())) or "none"
    shown = f": {'; '.join(fell[:2])}" + (" …" if len(fell) > 2 else "") if fell else ""
    row = f"{len(ratios)} | {mean:.2f} | {max(ratios):.2f} | {len(fell)}{shown} | {counted}"
    return _Ratio(mean, row)
