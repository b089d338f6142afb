"""A session's turns as `bxctl show` writes them: the conversation as a person reads it, a
table of each turn's figures, JSON and Markdown, for the current epoch or every one. Pure:
epochs in, lines out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from ..proto import CacheLossRecord, Outcome, TurnFile, json_str, unstructure
from ..session import EpochView, Taken, ToolStep, Turn
from .table import BOLD, DIM, align, style

__all__ = ["as_json", "conversation", "markdown", "missed", "stats"]

CUT = 100  # characters of a tool's arguments or result shown in the conversation
MISSED = 5  # turns `bxctl chat` shows that ran since the owner last looked


def _cut(text: str, size: int = CUT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= size else flat[: size - 1] + "…"


def shown(views: Sequence[EpochView], every: bool) -> Iterator[tuple[EpochView, list[Turn]]]:
    """Each epoch and the turns to show of it: with `every`, each turn once (an epoch's
    carried turns were shown with the epoch they come from)."""
    for view in views:
        yield view, view.own if every and view.epoch != views[0].epoch else view.turns


def opened(view: EpochView) -> str:
    """A line on how an epoch after the first began."""
    summary = "a summary of what came before" if view.summary else "no summary"
    return f"[epoch {view.epoch}: {summary}, and {view.carried} turns carried over]"


def conversation(views: Sequence[EpochView], color: bool, *, every: bool) -> Iterator[str]:
    for view, turns in shown(views, every):
        if view.epoch:
            yield style(opened(view), DIM, color)
            if view.summary:
                yield style(view.summary, DIM, color)
            yield ""
        yield from _turns(turns, color)


def file_line(file: TurnFile) -> str:
    """A file of a turn in one line: its name, media type, size and where it is kept."""
    name = json_str(file.name) if not file.name.isprintable() else file.name
    text = ", shown as its text" if file.text is not None else ""
    return f"{name} ({file.media_type}, {file.size:,} bytes{text}; files/{file.sha256[:12]}…)"


def _turns(turns: Sequence[Turn], color: bool) -> Iterator[str]:
    for turn in turns:
        yield style(f"> {turn.user}", BOLD, color)
        yield from (style(f"[file] {file_line(f)}", DIM, color) for f in turn.files)
        for reasoning in turn.reasoning:
            yield style(f"[thinking] {_cut(reasoning)}", DIM, color)
        for at, step in enumerate(turn.steps):
            yield from (style(f"> {t.content}", BOLD, color) for t in _taken(turn, at))
            result = "(no result)" if step.result is None else _cut(step.result)
            yield style(f"[tool] {step.name} {_cut(step.arguments, 60)} -> {result}", DIM, color)
        yield from (style(f"> {t.content}", BOLD, color) for t in _taken(turn, len(turn.steps)))
        if turn.wrapped_up:
            yield style("[cut at max_tokens; asked to wrap up]", DIM, color)
        if turn.answer is not None:
            yield turn.answer
        if turn.outcome not in (None, Outcome.DONE):
            yield style(f"[turn ended: {turn.outcome.value}]", DIM, color)
        yield ""


def missed(
    views: Sequence[EpochView], shown: int, color: bool = False, most: int = MISSED
) -> list[str]:
    """The turns after turn `shown` (the last a person saw end: a schedule's since, while
    nobody watched), the newest `most` of them, as `bxctl chat` shows them on opening."""
    turns = [turn for view in views for turn in view.turns if turn.number > shown]
    if not turns:
        return []
    said = f"[{len(turns)} turn{'s' if len(turns) > 1 else ''} ran since you last looked"
    said += f"; the last {most}:]" if len(turns) > most else ":]"
    return [style(said, DIM, color), *_turns(turns[-most:], color)]


def _taken(turn: Turn, after: int) -> list[Taken]:
    """The messages the turn took (soft breaks) after its first `after` tool steps."""
    return [taken for taken in turn.taken if taken.after == after]


def stats(views: Sequence[EpochView], *, every: bool) -> Iterator[str]:
    turns = [turn for _view, part in shown(views, every) for turn in part]
    head = [
        "TURN",
        "OUTCOME",
        "COMPLETIONS",
        "TOOLS",
        "PROCESSED",
        "REUSED",
        "REUSE",
        "GENERATED",
        "SECONDS",
    ]
    rows = [head]
    totals = [0, 0, 0, 0, 0, 0]
    for turn in turns:
        f = turn.figures
        figures = [f.completions, f.tool_calls, f.prompt_n, f.cache_n, f.predicted_n, f.ms]
        totals = [a + b for a, b in zip(totals, figures, strict=True)]
        outcome = turn.outcome.value if turn.outcome else "-"
        rows.append([str(turn.number), outcome, *_figures(figures, turn.end is not None)])
    whole = totals[2] + totals[3]
    rows.append(["all", "", *_figures(totals, True)])
    rows[-1][6] = f"{totals[3] / whole:.2f}" if whole else "-"
    yield from align(rows, right=(0, 2, 3, 4, 5, 6, 7, 8))
    yield from losses(turns)


def losses(turns: Sequence[Turn]) -> Iterator[str]:
    """A line counting the session's cache losses by cause, when it had any (a record from
    before causes counts as `unknown`)."""
    causes = Counter(
        record.cause.value if record.cause else "unknown"
        for turn in turns
        for record in turn.records
        if isinstance(record, CacheLossRecord)
    )
    if causes:
        counted = ", ".join(f"{cause} {n}" for cause, n in sorted(causes.items()))
        yield f"cache losses: {causes.total()} ({counted})"


def _figures(values: list[int], timed: bool) -> list[str]:
    completions, tools, processed, reused, generated, ms = values
    whole = processed + reused
    return [
        str(completions),
        str(tools),
        f"{processed:,}",
        f"{reused:,}",
        f"{reused / whole:.2f}" if whole else "-",
        f"{generated:,}",
        f"{ms / 1000:.2f}" if timed else "-",
    ]


def as_json(session: str, views: Sequence[EpochView], *, every: bool) -> dict[str, Any]:
    return {
        "session": session,
        "epochs": [
            {"epoch": view.epoch, "summary": view.summary, "carried_turns": view.carried}
            for view in views
        ],
        "turns": [
            {
                "epoch": view.epoch,
                "number": turn.number,
                "time": str(turn.time),
                "user": turn.user,
                "files": [unstructure(file) for file in turn.files],
                "reasoning": turn.reasoning,
                "tools": [unstructure_step(step) for step in turn.steps],
                "taken": [{"after": t.after, "content": t.content} for t in turn.taken],
                "answer": turn.answer,
                "end": unstructure(turn.figures) if turn.end else None,
            }
            for view, turns in shown(views, every)
            for turn in turns
        ],
    }


def unstructure_step(step: ToolStep) -> dict[str, Any]:
    return {
        "name": step.name,
        "arguments": step.arguments,
        "result": step.result,
        "truncated": step.truncated,
    }


def markdown(session: str, views: Sequence[EpochView], *, every: bool) -> Iterator[str]:
    yield f"# Session {session}"
    for view, turns in shown(views, every):
        if view.epoch:
            yield ""
            yield f"## Epoch {view.epoch}"
            yield ""
            yield f"*{opened(view)[1:-1].capitalize()}.*"
            if view.summary:
                yield ""
                yield from (f"> {line}" for line in view.summary.splitlines() or [""])
        yield from _markdown_turns(turns)


def _markdown_turns(turns: Sequence[Turn]) -> Iterator[str]:
    for turn in turns:
        yield ""
        yield f"## Turn {turn.number} ({turn.time})"
        yield ""
        yield from (f"> {line}" for line in turn.user.splitlines() or [""])
        yield from (f">\n> *file:* {file_line(file)}" for file in turn.files)
        for at, step in enumerate([*turn.steps, None]):
            for taken in _taken(turn, at):
                yield ""
                yield from (f"> {line}" for line in taken.content.splitlines() or [""])
            if step is not None:
                yield ""
                yield f"- tool `{step.name}` `{_cut(step.arguments, 200)}`"
                if step.result is not None:
                    yield f"  - result: {_cut(step.result, 200)}"
        if turn.answer is not None:
            yield ""
            yield turn.answer
        if turn.outcome not in (None, Outcome.DONE):
            yield ""
            yield f"*The turn ended: {turn.outcome.value}.*"
