"""The peers row's section of `docs/benchmarks.md`, from what was measured. Pure.

Two parts: on the real server, what each system's requests do to the server's cache (from
the requests themselves and the server's own figures), and its time per turn; against the
fake, the loop overhead per completion of each, paired with a direct minimal client.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence

from attrs import frozen

from ..report import Row
from ..stats import spread
from .checks import Exchange, Link, Reuse, again, links, sent_keys

__all__ = ["FakeRun", "RealRun", "peers_row"]

FIRST_TURNS = (1, 6)  # the first turn of each process


@frozen
class RealRun:
    """One system's ten turns on the real server."""

    name: str
    exchanges: tuple[Exchange, ...]  # its chat requests, in order
    others: tuple[str, ...]  # any other request it made (`GET /slots`)
    secs: tuple[float, ...]  # per turn, as its own client timed it
    startups: tuple[float, ...]  # per process, until ready

    def links(self) -> list[Link]:
        return links(self.exchanges)

    def reuses(self) -> list[Reuse]:
        return [e.reuse for e in self.exchanges if e.reuse is not None]

    def extends(self) -> bool:
        return len(self.exchanges) == 10 and all(link.extends for link in self.links())

    def kept_history(self) -> bool:
        """Request 6 (the first of the new process) extends request 5 by the answer to turn 5,
        exactly as streamed, and the next user message."""
        restart = [link for link in self.links() if link.number == 6]
        return bool(restart) and restart[0].extends and restart[0].echoed and restart[0].added == 2


@frozen
class FakeRun:
    """One system's completions against the fake, each paired with a direct client's."""

    name: str
    pairs: tuple[tuple[int, float, float], ...]  # turn, through the system, direct (s)
    startups: tuple[float, ...]

    def added_ms(self, *, first: bool) -> list[float]:
        """Per pair, the system's time less the direct client's, in ms: for the first turns
        of a process (`first`) or the others."""
        return [
            (through - direct) * 1000
            for turn, through, direct in self.pairs
            if (turn in FIRST_TURNS) == first
        ]


def peers_row(
    real: Sequence[RealRun],
    fake: Sequence[FakeRun],
    reasoned: Sequence[RealRun],
    *,
    versions: Mapping[str, str],
    conversations: int,
    tokens: int,
    max_tokens: int,
) -> Row:
    loopd = next(run for run in real if run.name == "loopd")
    processed = ", ".join(f"{run.name} {_processed(run):,}" for run in real)
    overhead = ", ".join(
        f"{run.name} {_ms(statistics.median(run.added_ms(first=False)))}" for run in fake
    )
    extending = [run.name for run in real if run.extends() and run.kept_history()]
    every = "every system" if len(extending) == len(real) else ", ".join(extending) or "none"
    result = (
        f"{every}: each request a byte extension of the one before, the history kept across a "
        f"restart; prompt tokens processed: {processed}; added per completion (fake): {overhead}"
    )
    return Row(
        figure="the peers side by side",
        result=result,
        bar="loopd: every request extends the one before, across a restart (the peers are "
        "reported, not judged)",
        met=loopd.extends() and loopd.kept_history(),
        details=tuple(
            _intro(versions)
            + _real_part(real, max_tokens)
            + _fake_part(fake, conversations, tokens)
            + _reasoning_part(reasoned)
        ),
    )


def _intro(versions: Mapping[str, str]) -> list[str]:
    pins = ", ".join(f"{peer} ({top})" for peer, top in versions.items())
    return [
        f"loopd (this checkout) and three peers, each in a virtual environment of its own with "
        f"pinned versions: {pins}. The same system prompt and ten user messages through each; "
        "turns 1-5 in one process and 6-10 in a new one (loopd restarted; each peer's process "
        "started again and its history taken from the peer's own store: pydantic-ai's message "
        "history as JSON, openai-agents' `SQLiteSession`, llm's `logs.db`, one `llm prompt` "
        "process a turn). Turns are interleaved: each turn goes to every system before the "
        "next, in an order rotated each turn.",
    ]


def _processed(run: RealRun) -> int:
    return sum(reuse.prompt_n for reuse in run.reuses())


def _ms(value: float) -> str:
    return f"{value:+,.1f} ms" if abs(value) < 100 else f"{value:+,.0f} ms"


def _real_part(real: Sequence[RealRun], max_tokens: int) -> list[str]:
    names = [run.name for run in real]
    head = ["", *names]
    out = [
        "",
        "#### On the real server",
        "",
        "SmolLM2-135M with its own chat template; one llama-server per system (`-c 4096 -np 1 "
        "-t 2`), so no system's prompt is in another's slot; temperature 0 and "
        f"`max_tokens` {max_tokens}, each through the system's own settings. Every request went "
        "through a recording proxy, so what is shown is the body as sent and the server's own "
        "figures (`timings`).",
        "",
        _line(head),
        _line(["---"] * len(head)),
    ]
    rows: list[tuple[str, list[str]]] = [
        ("prompt tokens processed in all", [_processed_cell(run) for run in real]),
        ("processed again (beyond the tokens each request added)",
         [_again_cell(run) for run in real]),
        ("each request a byte extension of the one before", [_extends_cell(run) for run in real]),
        ("the previous answer sent back exactly as streamed", [_echo_cell(run) for run in real]),
        ("restart (5 → 6) kept the history", [_yes(run.kept_history()) for run in real]),
        ("time per turn, median (min-max)", [_secs_cell(run.secs) for run in real]),
        ("of which the server's own, median", [_server_cell(run) for run in real]),
        ("the client's own time per turn (less the server's), median",
         [_client_cell(run) for run in real]),
        ("requests besides the ten chat completions", [_others_cell(run) for run in real]),
    ]  # fmt: skip
    out += [_line([f"**{label}**", *cells]) for label, cells in rows]
    out += _breaks(real)
    out += [
        "",
        "Reuse per request, cache_n / (cache_n + prompt_n) from the server's figures (0.00 "
        "for the first request, which nothing precedes):",
        "",
        _line(["request", *names]),
        _line(["---"] * (len(names) + 1)),
    ]
    for index in range(max(len(run.exchanges) for run in real)):
        out.append(_line([str(index + 1), *[_reuse_cell(run, index) for run in real]]))
    out += [
        "",
        "Time per turn (s), from the call to the full answer as each system's own client "
        "measures it (llm's is a whole `llm prompt` process, its start-up included):",
        "",
        _line(["turn", *names]),
        _line(["---"] * (len(names) + 1)),
    ]
    for index in range(max(len(run.secs) for run in real)):
        cells = [f"{run.secs[index]:.2f}" if index < len(run.secs) else "" for run in real]
        out.append(_line([str(index + 1), *cells]))
    out += ["", _same_answers(real), "", "What each sends besides `messages`, in its order:", ""]
    for run in real:
        keys = sent_keys([exchange.body for exchange in run.exchanges])
        shown = "; ".join(
            f"`{key}` {' or '.join(map(_short, values))}" for key, values in keys.items()
        )
        out.append(f"- {run.name}: {shown}")
    return out


def _same_answers(real: Sequence[RealRun]) -> str:
    turns = min(len(run.exchanges) for run in real)
    same = sum(len({run.exchanges[i].answer for run in real}) == 1 for i in range(turns))
    return f"The answer was the same, byte for byte, from every system on {same} of {turns} turns."


def _short(value: str) -> str:
    """A value as sent, or what it is when it is long (loopd's tool schemas)."""
    if len(value) <= 60:
        return value
    parsed = json.loads(value)
    return f"(a list of {len(parsed)})" if isinstance(parsed, list) else value[:57] + "..."


def _line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _yes(value: bool) -> str:
    return "yes" if value else "**no**"


def _processed_cell(run: RealRun) -> str:
    reuses = run.reuses()
    if not reuses:
        return "no figures"
    first, rest = reuses[0].prompt_n, sum(r.prompt_n for r in reuses[1:])
    return f"**{first + rest:,}** ({first:,} + {rest:,} after the first)"


def _again_cell(run: RealRun) -> str:
    extra = again(run.reuses())
    return f"{sum(extra):,}" + (f" (most in one: {max(extra)})" if any(extra) else "")


def _extends_cell(run: RealRun) -> str:
    done = run.links()
    return f"{sum(link.extends for link in done)} of {len(done)}"


def _echo_cell(run: RealRun) -> str:
    done = run.links()
    return f"{sum(link.echoed for link in done)} of {len(done)}"


def _secs_cell(secs: Sequence[float]) -> str:
    figure = spread(secs)
    return f"{figure.median:.2f} s ({figure.low:.2f}-{figure.high:.2f})"


def _server_cell(run: RealRun) -> str:
    times = [e.server_s for e in run.exchanges if e.server_s is not None]
    return f"{statistics.median(times):.2f} s" if times else "no figures"


def _client_cell(run: RealRun) -> str:
    own = [
        secs - exchange.server_s
        for secs, exchange in zip(run.secs, run.exchanges, strict=False)
        if exchange.server_s is not None
    ]
    return f"**{statistics.median(own) * 1000:,.0f} ms**" if own else "no figures"


def _others_cell(run: RealRun) -> str:
    if not run.others:
        return "none"
    counts = {name: run.others.count(name) for name in run.others}
    return ", ".join(
        f"`{name}` {count} times" if count > 1 else f"`{name}`" for name, count in counts.items()
    )


def _reuse_cell(run: RealRun, index: int) -> str:
    if index >= len(run.exchanges) or (reuse := run.exchanges[index].reuse) is None:
        return ""
    return f"{reuse.cache_n}/{reuse.cache_n + reuse.prompt_n} = {reuse.ratio:.2f}"


def _breaks(real: Sequence[RealRun]) -> list[str]:
    found = [
        f"- {run.name}, request {link.number}: {link.breaks}"
        for run in real
        for link in run.links()
        if link.breaks
    ]
    return ["", "Where a request breaks the extension:", "", *found] if found else []


def _reasoning_part(runs: Sequence[RealRun]) -> list[str]:
    if not runs:
        return []
    names = [run.name for run in runs]
    example = runs[0].exchanges[0]
    out = [
        "",
        "#### With reasoning (the fake)",
        "",
        "One more conversation against the fake, scripted to reason before every answer "
        f"(reasoning {example.reasoning!r}, answer {example.answer!r}), through the proxy. "
        "The fake's template renders an earlier answer's `reasoning_content` back inside "
        "`<think>`, and its slot keeps the reasoning it generated, as a template that keeps "
        "earlier reasoning does; its counts are of its own word-like tokens.",
        "",
        _line(["", *names]),
        _line(["---"] * (len(names) + 1)),
    ]
    rows: list[tuple[str, list[str]]] = [
        ("the reasoning sent back with the answer",
         [f"{sum(link.reasoning_back for link in run.links())} of 9" for run in runs]),
        ("each request a byte extension of the one before", [_extends_cell(run) for run in runs]),
        ("the previous answer sent back exactly as streamed", [_echo_cell(run) for run in runs]),
        ("restart (5 → 6) kept the history", [_yes(run.kept_history()) for run in runs]),
        ("prompt tokens processed in all", [_processed_cell(run) for run in runs]),
        ("processed again (beyond the tokens each request added)",
         [_again_cell(run) for run in runs]),
    ]  # fmt: skip
    out += [_line([f"**{label}**", *cells]) for label, cells in rows]
    return out + _breaks(runs)


def _fake_part(fake: Sequence[FakeRun], conversations: int, tokens: int) -> list[str]:
    out = [
        "",
        "#### Against the fake: the loop overhead per completion",
        "",
        f"The fake server on TCP, {tokens} content tokens 1 ms apart (as in the loop overhead "
        f"row); {conversations} conversation{'s' if conversations > 1 else ''} of ten turns per "
        "system, after one that "
        "recorded each system's request bodies through the proxy. Each turn is paired with the "
        "same body sent straight to the fake by a minimal httpx client on a kept-alive "
        "connection, in alternating order; *added* is the system's time less the direct "
        "client's. A peer's turn is timed inside its process, from its call to the full answer "
        "with its history saved; loopd's at a channel client, from connecting to `turn_done`.",
        "",
        "| | added per completion, median of pairs (ms) | first turn of a process, 1 and 6 (ms) "
        "| a new process until ready (s) |",
        "|---|---|---|---|",
    ]
    for run in fake:
        steady = spread(run.added_ms(first=False))
        first = spread(run.added_ms(first=True))
        startup = spread(run.startups)
        start_cell = f"{startup.median:.2f} (min {startup.low:.2f}, max {startup.high:.2f})"
        if run.name == "llm":  # the driver's own start says nothing: llm starts every turn
            start_cell = "every turn: a new `llm prompt` process (in the figures beside)"
        out.append(
            f"| {run.name} | **{_ms(steady.median)}** (min {_ms(steady.low)}, max "
            f"{_ms(steady.high)}, n={steady.n}) | {_ms(first.median)} (n={first.n}) | "
            f"{start_cell} |"
        )
    return out
