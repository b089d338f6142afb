"""A replay's report for a person and for a script. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from attrs import frozen

from .compare import Difference
from .sides import TurnSide, WhatIf
from .tape import Place

__all__ = ["Report", "as_json", "said", "side_by_side", "side_by_side_json", "summary_table"]

_AROUND = 60  # the bytes of each line shown around its first difference


@frozen
class Report:
    """What a replay found: the runs it replayed and the lines it compared, and the first
    difference, or the input the log lacks (`missing`, at `missing_at`)."""

    session: str
    runs: int
    lines: int
    difference: Difference | None = None
    missing: str | None = None
    missing_at: Place | None = None
    turn: int = 0  # the session's turn the difference is in

    @property
    def identical(self) -> bool:
        return self.difference is None and self.missing is None


def said(report: Report) -> str:
    """The report in words: identical, the first difference, or what the log lacks."""
    head = f"session {report.session}: "
    if report.missing is not None:
        where = _where(report.missing_at)
        return f"{head}cannot be replayed: {where} lacks {report.missing}\n"
    found = report.difference
    if found is None:
        return (
            f"{head}identical ({_turns(report.runs)} replayed, {report.lines:,} lines compared)\n"
        )
    lines = [f"{head}differs in turn {report.turn}"]
    lines.append(
        f"  recorded {_where(found.recorded_at)}, replayed {_where(found.replayed_at)}: "
        f"{found.record}"
        + (f", field {found.field}" if found.field else "")
        + f", byte {found.offset}"
    )
    if found.why:
        lines.append(f"  the replay asked for {found.why}, which the log does not hold there")
    lines.append(f"  recorded: {_excerpt(found.recorded, found.offset)}")
    lines.append(f"  replayed: {_excerpt(found.replayed, found.offset)}")
    return "\n".join(lines) + "\n"


def as_json(report: Report) -> dict[str, Any]:
    """The report as one JSON object: `identical`, and the difference or what is missing."""
    value: dict[str, Any] = {
        "session": report.session,
        "identical": report.identical,
        "turns": report.runs,
        "lines": report.lines,
    }
    if report.difference is not None:
        value["difference"] = _difference(report.difference, report.turn)
    if report.missing is not None:
        value["missing"] = {"input": report.missing, "at": _place(report.missing_at)}
    return value


def summary_table(reports: Sequence[tuple[Report | None, str]]) -> str:
    """`--all`'s table: a row per session (a report, or why there is none)."""
    rows = [("SESSION", "TURNS", "LINES", "RESULT")]
    for report, problem in reports:
        if report is None:
            rows.append(("", "", "", problem))
            continue
        result = (
            "identical"
            if report.identical
            else f"missing input at {_where(report.missing_at)}"
            if report.missing
            else f"differs in turn {report.turn}"
        )
        rows.append((report.session, str(report.runs), f"{report.lines:,}", problem or result))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return "".join(
        f"{row[0]:<{widths[0]}}  {row[1]:>{widths[1]}}  {row[2]:>{widths[2]}}  {row[3]}\n"
        for row in rows
    )


def _difference(found: Difference, turn: int) -> dict[str, Any]:
    return {
        "turn": turn,
        "recorded_at": _place(found.recorded_at),
        "replayed_at": _place(found.replayed_at),
        "record": found.record,
        "field": found.field,
        "offset": found.offset,
        "recorded": found.recorded.decode(errors="replace") if found.recorded else None,
        "replayed": found.replayed.decode(errors="replace") if found.replayed else None,
        "why": found.why or None,
    }


def _place(place: Place | None) -> dict[str, int] | None:
    return None if place is None else {"epoch": place[0], "line": place[1] + 1}


def _where(place: Place | None) -> str:
    return "no line" if place is None else f"epoch {place[0]} line {place[1] + 1}"


def _turns(count: int) -> str:
    return f"{count} turn" + ("" if count == 1 else "s")


def _excerpt(line: bytes | None, offset: int) -> str:
    if line is None:
        return "(no line)"
    start = max(0, offset - _AROUND)
    text = line[start : offset + _AROUND].decode(errors="replace")
    return ("…" if start else "") + text + ("…" if offset + _AROUND < len(line) else "")


def side_by_side(found: WhatIf) -> str:
    """`--with`'s report: each turn's message, then the recorded turn and the what-if's."""
    lines = [f"session {found.session} with {found.changed}: the what-if is {found.made}"]
    for number, (message, old, new) in enumerate(found.turns, 1):
        lines.append(f"turn {number}: {_line(message, 70)}")
        for label, side in (("recorded", old), ("what-if ", new)):
            tools = ", ".join(side.tools) or "no tools"
            lines.append(
                f"  {label} {side.outcome:<10} {side.ms / 1000:7.2f} s  "
                f"{side.processed:>7,} processed {side.reused:>7,} reused  {tools}"
            )
            lines.append(f"           {_line(side.answer, 80)}")
    return "\n".join(lines) + "\n"


def side_by_side_json(found: WhatIf) -> dict[str, Any]:
    return {
        "session": found.session,
        "what_if": found.made,
        "with": found.changed,
        "turns": [
            {"turn": number, "message": message, "recorded": _side(old), "what_if": _side(new)}
            for number, (message, old, new) in enumerate(found.turns, 1)
        ],
    }


def _side(side: TurnSide) -> dict[str, Any]:
    return {
        "answer": side.answer,
        "tools": list(side.tools),
        "processed": side.processed,
        "reused": side.reused,
        "ms": side.ms,
        "outcome": side.outcome,
    }


def _line(text: str, most: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 1] + "…"
