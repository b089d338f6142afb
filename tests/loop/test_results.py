"""A result over the cap keeps its head and its tail, its whole text is kept in the session's
folder under the hash its `tool_result` names, and `read_result` gives the model any part of
it, as untrusted as the result it came from; nothing is run again to see it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import attrs

from boxmaker import layout
from boxmaker import proto as p
from boxmaker.loopd.loop import TurnOutcome, run_turn
from boxmaker.session import Problem
from boxmaker.store.offline import check_epochs
from boxmaker.testing.fake_server import FakeLlamaServer, Reply

from ..helpers import EventLog, Rig, fenced_baseline, open_rig

LONG = "".join(f"line {n}: ok\n" for n in range(400)) + "FAILED: the build broke at step 7\n"
CAP = "[loop]\ntool_result_cap = 256\n"


class BuildLog:
    """A port whose every call answers the long, untrusted, private build log."""

    def __init__(self) -> None:
        self.requests: list[p.ToolRequest] = []

    async def call(self, request: p.ToolRequest) -> p.ToolResponse:
        self.requests.append(request)
        return p.ResultResponse(LONG, p.DataClass.PRIVATE, untrusted=True, truncated=False)


def call(tool: str, **arguments: Any) -> tuple[str, str]:
    return (tool, json.dumps(arguments))


def echo() -> tuple[str, str]:
    return ("call_tool", json.dumps({"name": "echo", "arguments": {"text": "build"}}))


def results(rig: Rig) -> list[p.ToolResultRecord]:
    return [r for r in rig.session.records if isinstance(r, p.ToolResultRecord)]


async def turn(rig: Rig, content: str) -> tuple[EventLog, TurnOutcome]:
    log = EventLog()
    return log, await run_turn(rig.session, rig.runtime, content, log)


async def test_a_long_result_keeps_its_head_and_tail_and_its_whole_text(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[
            Reply(tool_calls=(echo(),)),
            Reply(tool_calls=(call("read_result", call=1, offset=120, limit=40),)),
            Reply(content="It broke at step 7."),
        ]
    )
    async with open_rig(tmp_path, fake, CAP) as rig:
        port = BuildLog()
        rig.runtime = attrs.evolve(rig.runtime, port=port)
        await turn(rig, "Build it.")
        cut, read = results(rig)
        folder = rig.session.log_path.parent
    assert cut.truncated is True
    assert cut.content.startswith("line 0: ok\n")
    assert cut.content.endswith("FAILED: the build broke at step 7\n")  # the tail is kept
    assert '; read_result {"call": 1, "offset": 128} reads it ...]' in cut.content
    assert len(cut.content.encode()) < 256 + 100
    kept = layout.result_file(folder, 1).read_bytes()
    assert kept == LONG.encode()
    assert cut.whole == hashlib.sha256(kept).hexdigest()
    assert read.content == (
        f"Characters 120 to 160 of {len(LONG):,} of call 1's result; the rest from offset 160:\n"
        + LONG[120:160]
    )
    # A part of an untrusted, private result is untrusted and private too; nothing ran again.
    assert (read.data_class, read.untrusted) == (p.DataClass.PRIVATE, True)
    assert len(port.requests) == 1
    assert (folder / "results").stat().st_mode & 0o777 == 0o700


async def test_a_read_is_never_more_than_the_cap_and_says_where_the_rest_starts(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(
        script=[
            Reply(tool_calls=(echo(),)),
            Reply(tool_calls=(call("read_result", call=1),)),
            Reply(tool_calls=(call("read_result", call=1, offset=len(LONG)),)),
            Reply(content="Done."),
        ]
    )
    async with open_rig(tmp_path, fake, CAP) as rig:
        rig.runtime = attrs.evolve(rig.runtime, port=BuildLog())
        await turn(rig, "Build it.")
        _, whole, past = results(rig)
    assert whole.truncated is False
    assert len(whole.content.encode()) <= 256
    heading, part = whole.content.split("\n", 1)
    assert heading == f"Characters 0 to {len(part)} of {len(LONG):,} of call 1's result; " + (
        f"the rest from offset {len(part)}:"
    )
    assert LONG.startswith(part)
    assert past.content == f"Call 1's result has {len(LONG):,} characters; offset {len(LONG)} " + (
        "is past its end."
    )


async def test_a_kept_result_is_read_back_after_a_restart(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[
            Reply(tool_calls=(echo(),)),
            Reply(content="Long."),
            Reply(tool_calls=(call("read_result", call=1, offset=len(LONG) - 34),)),
            Reply(content="Step 7."),
        ]
    )
    async with open_rig(tmp_path, fake, CAP) as rig:
        rig.runtime = attrs.evolve(rig.runtime, port=BuildLog())
        await turn(rig, "Build it.")
        await rig.reopen()
        await turn(rig, "Where did it break?")
        read = results(rig)[-1]
    assert read.content.endswith("\nFAILED: the build broke at step 7\n")


async def test_a_call_number_with_no_result_is_told_so(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[Reply(tool_calls=(call("read_result", call=9),)), Reply(content="Hm.")]
    )
    async with open_rig(tmp_path, fake, CAP) as rig:
        await turn(rig, "Read 9.")
        [unknown] = results(rig)
    assert unknown.content == "No result numbered 9 in this part of the conversation."
    assert rig.tools.requests == []


async def test_a_tampered_whole_result_is_refused(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[
            Reply(tool_calls=(echo(),)),
            Reply(content="Long."),
            Reply(tool_calls=(call("read_result", call=1, offset=200),)),
            Reply(content="Hm."),
        ]
    )
    async with open_rig(tmp_path, fake, CAP) as rig:
        rig.replay = False  # its whole result is changed by hand
        rig.runtime = attrs.evolve(rig.runtime, port=BuildLog())
        await turn(rig, "Build it.")
        kept = layout.result_file(rig.session.log_path.parent, 1)
        kept.write_text(LONG.replace("step 7", "step 1"))
        await turn(rig, "Read it.")
        read = results(rig)[-1]
    assert read.content == (
        "Call 1's whole result is missing or was changed on disk; only what you were given of "
        "it is left."
    )


async def test_a_fenced_session_s_cut_names_no_tool_it_lacks(tmp_path: Path) -> None:
    block = "```tool\n" + json.dumps({"name": "echo", "arguments": {"text": "x"}}) + "\n```"
    fake = FakeLlamaServer(script=[Reply(content=block), Reply(content="Long.")])
    async with open_rig(tmp_path, fake, CAP, baseline=fenced_baseline()) as rig:
        rig.runtime = attrs.evolve(rig.runtime, port=BuildLog())
        await turn(rig, "Echo x.")
        [cut] = results(rig)
    assert cut.truncated is True
    assert "read_result" not in cut.content
    assert " bytes left out ...]" in cut.content
    assert cut.whole is not None  # kept all the same


async def test_verify_checks_each_kept_result_against_its_hash(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(tool_calls=(echo(),)), Reply(content="Long.")])
    async with open_rig(tmp_path, fake, CAP) as rig:
        rig.runtime = attrs.evolve(rig.runtime, port=BuildLog())
        await turn(rig, "Build it.")
        folder = rig.session.log_path.parent
    assert isinstance(check_epochs(folder, every=True), str)  # whole
    kept = layout.result_file(folder, 1)
    kept.write_text(LONG[:-2])
    problem = check_epochs(folder, every=True)
    assert isinstance(problem, Problem)
    lines = (folder / "0.jsonl").read_bytes().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if b'"whole":' in text)
    assert (problem.line, problem.reason) == (
        line, f"the whole result {kept} is not what its hash says"
    )  # fmt: skip
    kept.unlink()
    problem = check_epochs(folder, every=True)
    assert isinstance(problem, Problem)
    assert problem.reason.endswith("cannot be read: No such file or directory")
