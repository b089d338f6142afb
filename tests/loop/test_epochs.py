"""Epochs through real turns against the fake: when a new epoch opens, what it carries, the
summary request, the first request of an epoch, the crash safety of the switch, and messages
that cannot fit."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from boxmaker import proto as p
from boxmaker.loopd.loop import InferFailed, SessionFull, TurnOutcome, run_turn
from boxmaker.session import (
    SUMMARY_INSTRUCTION,
    SUMMARY_REPLY,
    Problem,
    check_log,
    preface,
    request_messages,
    sha256_hex,
)
from boxmaker.store import FileSystem
from boxmaker.testing._render import tokenize
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply

from ..helpers import EventLog, Rig, open_rig, read_epochs

N_CTX = 1200  # the fake's baseline is 556 of its tokens; epoch_at 0.75 is 900
INSTRUCTION = {"role": "user", "content": SUMMARY_INSTRUCTION}


def words(n: int) -> str:
    """`n` tokens of the fake's tokenizer."""
    return " ".join(f"w{i}" for i in range(n))


def kinds(records: list[p.LogRecord]) -> list[str]:
    return [p.unstructure(r)["type"] for r in records]


async def turn(rig: Rig, content: str, **kwargs: Any) -> tuple[EventLog, TurnOutcome]:
    log = EventLog()
    return log, await run_turn(rig.session, rig.runtime, content, log, **kwargs)


def folder(rig: Rig) -> Path:
    return rig.store.folder(rig.session.id)


def verified(rig: Rig) -> list[list[p.LogRecord]]:
    """Every epoch's log read back, each whole by `bxctl verify`'s checks."""
    epochs = read_epochs(folder(rig))
    for number in range(len(epochs)):
        log = folder(rig) / f"{number}.jsonl"
        genesis = sha256_hex((folder(rig) / f"{number}.baseline.json").read_bytes())
        verdict = check_log(log.read_bytes(), log, genesis, None, epoch=number)
        assert not isinstance(verdict, Problem), verdict
    return epochs


FILL = [Reply(content=words(150)), Reply(content=words(150)), Reply(content=words(100))]
SUMMARY = Reply(content="We counted words, three times.")


async def filled(rig: Rig) -> None:
    """Three turns that take the conversation past epoch_at (900 of 1,200 tokens)."""
    for text in ("one", "two", "three"):
        await turn(rig, text)
    last = rig.session.last_usage()
    assert last is not None
    assert last.cache_n + last.prompt_n + last.predicted_n >= 750


async def test_past_epoch_at_the_next_turn_opens_an_epoch_that_carries_on(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[*FILL, SUMMARY, Reply(content="Four.")], n_ctx=N_CTX)
    async with open_rig(tmp_path, fake) as rig:
        await filled(rig)
        old = list(rig.session.records)
        log, outcome = await turn(rig, "four")
        assert outcome.content == "Four."
        [started] = log.of(p.EpochStart)
        assert started == p.EpochStart(epoch=1, carried_turns=started.carried_turns,  # type: ignore[attr-defined]
                                       summary_tokens=8)  # fmt: skip
        carried = started.carried_turns  # type: ignore[attr-defined]
        assert 1 <= carried < 3
        assert log.events.index(started) < log.events.index(log.of(p.Content)[0])
        zero, one = verified(rig)
        # The old epoch ends with the decision.
        assert zero[:-1] == old
        end = zero[-1]
        assert end == p.EpochEndRecord(end.time, 0, SUMMARY.content, 8, end.cache_n,  # type: ignore[union-attr]
                                       end.prompt_n, carried)  # fmt: skip
        # The new one: the same baseline byte for byte, its header, the summary, the newest
        # turns whole (record for record), then this turn.
        base = folder(rig)
        assert (base / "1.baseline.json").read_bytes() == (base / "0.baseline.json").read_bytes()
        assert kinds(one[:3]) == ["session_start", "epoch_start", "summary"]
        assert one[0].epoch == 1  # type: ignore[union-attr]
        assert one[1] == p.EpochStartRecord(one[1].time, 1, zero[0].time, 3 - carried, 3 - carried,  # type: ignore[union-attr]
                                            "one", 0, carried)  # fmt: skip
        said = p.SummaryPart(1, 0, 0, SUMMARY.content)  # level 1, of epoch 0's own turns
        assert one[2] == p.SummaryRecord(one[2].time, preface(said) + SUMMARY.content,  # type: ignore[union-attr]
                                         SUMMARY_REPLY, 1, 0, 0)  # fmt: skip
        starts = [i for i, r in enumerate(old) if isinstance(r, p.UserRecord)]
        copied = old[starts[-carried] :]
        assert one[3 : 3 + len(copied)] == copied
        assert kinds(one[3 + len(copied) :]) == ["user", "assistant", "usage", "turn_end"]
        # The index follows the new epoch: every turn counted once.
        assert rig.session.index.epoch == 1
        assert (rig.session.index.turns, rig.session.index.done) == (4, 4)
        assert rig.session.index.first == "one"


async def test_the_summary_request_is_a_prefix_of_the_slot_and_the_new_epoch_is_no_loss(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(
        script=[*FILL, SUMMARY, Reply(content="Four."), Reply(content="Five.")], n_ctx=N_CTX
    )
    async with open_rig(tmp_path, fake) as rig:
        await filled(rig)
        before = fake.requests[0][-1]
        log, _ = await turn(rig, "four")
        summary, first = fake.requests[0][-2:]
        # What the slot holds, then the instruction; thinking off; the cap (an eighth of n_ctx).
        asked = summary["messages"][:-1]
        assert asked == before["messages"][: len(asked)]  # up to the carried turns
        assert summary["messages"][-1] == {"role": "user", "content": SUMMARY_INSTRUCTION}
        assert summary["chat_template_kwargs"] == {"enable_thinking": False}
        assert summary["max_tokens"] == N_CTX // 8
        assert summary["tools"] == before["tools"]
        _zero, one = verified(rig)
        end = read_epochs(folder(rig))[0][-1]
        # It read only the instruction (and the role markers around it).
        assert end.prompt_n <= len(tokenize(SUMMARY_INSTRUCTION)) + 6  # type: ignore[union-attr]
        # The first request of the new epoch: the system message, the summary and its reply,
        # the carried turns, the message. The one expected miss, and no cache_loss for it.
        assert first["messages"] == p.unstructure(request_messages(rig.session.baseline, one[:-3]))
        assert first["messages"][1:3] == [
            {"role": "user", "content": preface(p.SummaryPart(1, 0, 0, "")) + SUMMARY.content},
            {"role": "assistant", "content": SUMMARY_REPLY},
        ]
        assert log.of(p.CacheLoss) == []
        usage = rig.session.last_usage()
        assert usage is not None
        # The one miss: only the system message and tools (556 tokens) are the old epoch's.
        assert usage.cache_n <= 557 < usage.cache_n + usage.prompt_n
        # And the next request of the epoch extends it and hits the cache.
        log, _ = await turn(rig, "five")
        assert log.of(p.CacheLoss) == []
        assert fake.requests[0][-1]["messages"][: len(first["messages"])] == first["messages"]
        after = rig.session.last_usage()
        assert after is not None
        assert after.cache_n >= usage.cache_n + usage.prompt_n + usage.predicted_n - 1
        assert not [r for e in verified(rig) for r in e if isinstance(r, p.CacheLossRecord)]


async def test_a_turn_refused_part_way_makes_the_next_turn_open_an_epoch(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[Reply(tool_calls=(("clock", "{}"),)), Fault(FaultKind.CONTEXT_FULL), SUMMARY,
                Reply(content="Fine.")],
    )  # fmt: skip
    async with open_rig(tmp_path, fake) as rig:
        with pytest.raises(SessionFull, match="the next turn opens a new epoch"):
            await turn(rig, "time?")
        log, outcome = await turn(rig, "again")
        assert outcome.content == "Fine."
        assert [e.epoch for e in log.of(p.EpochStart)] == [1]  # type: ignore[attr-defined]
        assert rig.session.epoch == 1


async def test_a_new_epoch_when_asked_for_and_none_for_an_empty_one(tmp_path: Path) -> None:
    fake = FakeLlamaServer(
        script=[Reply(content="A."), Reply(content="B."), SUMMARY, Reply(content="C.")]
    )
    async with open_rig(tmp_path, fake) as rig:
        log, _ = await turn(rig, "first", new_epoch=True)  # nothing to close yet
        assert log.of(p.EpochStart) == []
        await turn(rig, "second")
        log, outcome = await turn(rig, "third", new_epoch=True)
        assert outcome.content == "C."
        [started] = log.of(p.EpochStart)
        # One turn is summarised at least (carrying everything would change nothing).
        assert started.carried_turns == 1  # type: ignore[attr-defined]
        assert "first" in str(fake.requests[0][2]["messages"])  # summarised
        assert "second" not in str(fake.requests[0][2]["messages"][:-1])  # carried


async def test_a_refused_summary_is_cut_down_and_asked_again(tmp_path: Path) -> None:
    # The second turn's tool result is too big for what is left: refused part-way. The next
    # turn opens an epoch; the summary's request holds that result too, and is refused: it is
    # asked again without that turn, which is too big to keep.
    echo = ("call_tool", json.dumps({"name": "echo", "arguments": {"text": words(300)}}))
    script = [Reply(content=words(150)), Reply(tool_calls=(echo,)), SUMMARY, Reply(content="Ok.")]
    fake = FakeLlamaServer(script=script, n_ctx=N_CTX)
    async with open_rig(tmp_path, fake, "[loop]\ntool_result_cap = 65536\n") as rig:
        await turn(rig, "one")
        with pytest.raises(SessionFull):
            await turn(rig, "echo")
        log, outcome = await turn(rig, "three")
        assert outcome.content == "Ok."
        first, second = fake.requests[0][-3:-1]
        assert fake.statuses[0][-3:] == [400, 200, 200]
        assert first["messages"][-1] == second["messages"][-1] == INSTRUCTION
        assert words(300) in str(first["messages"])
        assert words(300) not in str(second["messages"])  # the turn too big to keep
        assert words(150) in str(second["messages"])  # the one before it kept
        assert log.of(p.EpochStart)[0].summary_tokens == 8  # type: ignore[attr-defined]


async def test_a_summary_refused_every_time_opens_the_epoch_without_one(tmp_path: Path) -> None:
    refusals = [Fault(FaultKind.CONTEXT_FULL)] * 3
    fake = FakeLlamaServer(script=[*FILL, *refusals, Reply(content="Four.")], n_ctx=N_CTX)
    async with open_rig(tmp_path, fake) as rig:
        await filled(rig)
        log, outcome = await turn(rig, "four")
        assert outcome.content == "Four."
        [started] = log.of(p.EpochStart)
        assert started.summary_tokens == 0  # type: ignore[attr-defined]
        zero, one = verified(rig)
        assert zero[-1].summary is None  # type: ignore[union-attr]
        assert "summary" not in kinds(one)


async def test_a_summary_that_fails_otherwise_fails_the_turn_and_writes_nothing(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(
        script=[*FILL, Fault(FaultKind.SERVER_ERROR), SUMMARY, Reply(content="Four.")],
        n_ctx=N_CTX,
    )
    async with open_rig(tmp_path, fake) as rig:
        await filled(rig)
        before = (folder(rig) / "0.jsonl").read_bytes()
        with pytest.raises(InferFailed, match="500"):
            await turn(rig, "four")
        assert (folder(rig) / "0.jsonl").read_bytes() == before
        assert sorted(os.listdir(folder(rig))) == ["0.baseline.json", "0.jsonl", "index.json"]
        _, outcome = await turn(rig, "four again")  # the switch is made again
        assert outcome.content == "Four."
        assert rig.session.epoch == 1


async def test_a_cancel_while_the_summary_is_asked_for_writes_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeLlamaServer(script=[*FILL, Fault(FaultKind.STALL, phase="idle", after=2)],
                           n_ctx=N_CTX)  # fmt: skip
    async with open_rig(tmp_path, fake) as rig:
        await filled(rig)
        before = (folder(rig) / "0.jsonl").read_bytes()
        with trio.move_on_after(5):
            await turn(rig, "four")
        assert (folder(rig) / "0.jsonl").read_bytes() == before
        assert rig.session.epoch == 0


# --- a message that cannot fit ------------------------------------------------------------


async def test_a_message_that_cannot_fit_is_not_kept_and_the_next_one_is_answered(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="Hello."), Reply(content="Short.")], n_ctx=N_CTX)
    async with open_rig(tmp_path, fake) as rig:
        await turn(rig, "hi")
        log_path = folder(rig) / "0.jsonl"
        before, index = log_path.read_bytes(), (folder(rig) / "index.json").read_bytes()
        with pytest.raises(SessionFull) as refused:
            await turn(rig, words(700))
        message = str(refused.value)
        assert "the message is 700 tokens" in message
        assert "holds 1,200 tokens" in message
        used = 1200 - int(message.split("which leaves ")[1].split(";")[0].replace(",", ""))
        assert 558 < used < 588  # the conversation before it: the baseline and one turn
        assert log_path.read_bytes() == before  # as it was before the turn: no turn_end even
        assert (folder(rig) / "index.json").read_bytes() == index
        assert rig.session.records == (await rig.reopen()).records
        _, outcome = await turn(rig, "and now?")
        assert outcome.content == "Short."
        assert not [r for e in verified(rig) for r in e if isinstance(r, p.CacheLossRecord)]


async def test_a_long_paste_into_a_young_session_is_session_full_not_internal(
    tmp_path: Path,
) -> None:
    # At 700 tokens the baseline alone (556) is past epoch_at: the first turn's next one opens
    # an epoch that carries nothing, and a 400-word message cannot fit even there. It is
    # refused naming its size; no second epoch is opened for it (the young one has no turn of
    # its own to leave behind).
    fake = FakeLlamaServer(script=[Reply(content="Hello."), SUMMARY, Reply(content="Ok.")],
                           n_ctx=700)  # fmt: skip
    async with open_rig(tmp_path, fake) as rig:
        await turn(rig, "hi")
        with pytest.raises(SessionFull, match="the message is 400 tokens and cannot fit"):
            await turn(rig, words(400))
        assert rig.session.epoch == 1
        assert kinds(rig.session.records) == ["session_start", "epoch_start", "summary"]
        _, outcome = await turn(rig, "short")
        assert outcome.content == "Ok."


async def crashed_before_the_cut(rig: Rig, message: str) -> None:
    """As if loopd was killed between the server's refusal of `message` and its cut: the
    user record is in the log, its turn unended."""
    rig.session.append(p.UserRecord(time=rig.runtime.clock.now(), content=message))
    await rig.reopen()


async def test_a_message_a_crash_left_in_the_log_makes_the_next_turn_open_an_epoch(
    tmp_path: Path,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content=words(100)), SUMMARY, Reply(content="Yes.")],
                           n_ctx=N_CTX)  # fmt: skip
    async with open_rig(tmp_path, fake) as rig:
        rig.replay = False  # its crash's message is written by hand
        await turn(rig, "one")
        await crashed_before_the_cut(rig, words(600))
        log, outcome = await turn(rig, "still there?")
        assert outcome.content == "Yes."
        # Refused with the old message in front: the conversation before the new one is full
        # by the refusal's count (loopd's own is the last usage, before the old message).
        assert fake.statuses[0][1] == 400
        [started] = log.of(p.EpochStart)
        assert started.carried_turns == 0  # type: ignore[attr-defined]  # too big to carry
        zero, one = verified(rig)
        assert [r.outcome for r in zero if isinstance(r, p.TurnEndRecord)][-1] is (
            p.Outcome.INTERRUPTED
        )
        # Its summary was refused with the big message in it, then asked without it.
        assert fake.statuses[0][2:] == [400, 200, 200]
        assert kinds(one[:3]) == ["session_start", "epoch_start", "summary"]
        assert [r.content for r in one if isinstance(r, p.UserRecord)] == ["still there?"]


async def test_a_message_too_long_even_for_a_new_epoch_is_refused_there(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[Reply(content=words(100)), SUMMARY, Reply(content="Short.")],
                           n_ctx=N_CTX)  # fmt: skip
    async with open_rig(tmp_path, fake) as rig:
        rig.replay = False  # its crash's message is written by hand
        await turn(rig, "one")
        await crashed_before_the_cut(rig, words(600))
        with pytest.raises(SessionFull, match="the message is 900 tokens"):
            await turn(rig, words(900))
        assert rig.session.epoch == 1  # the conversation was full: it moved on first,
        assert kinds(rig.session.records)[-1] == "summary"  # and the message was not kept
        _, outcome = await turn(rig, "short")
        assert outcome.content == "Short."


# --- crash safety of the switch -----------------------------------------------------------


class Killed(Exception):
    """loopd killed at this file operation: nothing after it happens."""


class KilledAt(FileSystem):
    """Once armed, the `at`-th file operation (1-based) and every one after it kill."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.calls = 0
        self.armed = False
        self.dead = False

    def _step(self) -> None:
        if self.armed:
            self.calls += 1
            self.dead = self.dead or self.calls >= self.at
        if self.dead:
            raise Killed(f"killed at file operation {self.calls}")

    def create(self, path: Path) -> int:
        self._step()
        return super().create(path)

    def open_append(self, path: Path) -> int:
        self._step()
        return super().open_append(path)

    def write(self, fd: int, data: bytes) -> int:
        self._step()
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self._step()
        super().fsync(fd)

    def rename(self, source: Path, target: Path) -> None:
        self._step()
        super().rename(source, target)

    def fsync_dir(self, path: Path) -> None:
        self._step()
        super().fsync_dir(path)

    def replace_file(self, path: Path, data: bytes, **options: Any) -> None:
        self._step()
        super().replace_file(path, data, **options)

    def close(self, fd: int) -> None:
        if not self.dead:  # a killed process's files are closed by the kernel
            super().close(fd)
        else:
            os.close(fd)


async def test_a_kill_at_any_point_of_the_switch_leaves_one_epoch_current_and_whole(
    tmp_path: Path,
) -> None:
    outcomes: set[str] = set()
    for at in range(1, 40):
        home = tmp_path / str(at)
        fake = FakeLlamaServer(script=FILL, default=SUMMARY, n_ctx=N_CTX)
        async with open_rig(home, fake) as rig:
            await filled(rig)
            rig.store.fs = fs = KilledAt(at)
            await rig.reopen()
            fs.armed = True
            try:
                await turn(rig, "four")
            except Killed:
                pass
            else:
                assert fs.calls < at
                break  # past the last file operation of the switch and the turn
            fs.armed = fs.dead = False
            current = max(int(n.split(".")[0]) for n in os.listdir(folder(rig)) if n[0] != "."
                          and n.endswith(".jsonl"))  # fmt: skip
            zero = read_epochs(folder(rig))[0]
            outcomes.add(
                "new epoch in place" if current == 1
                else "decided, not done" if isinstance(zero[-1], p.EpochEndRecord)
                else "nothing decided"
            )  # fmt: skip
            rig.store.fs = FileSystem()
            resumed = await rig.reopen()  # finishes a switch that was decided
            assert not [n for n in os.listdir(folder(rig)) if n.startswith(".")]  # swept
            epochs = verified(rig)
            assert resumed.epoch == len(epochs) - 1
            if isinstance(epochs[0][-1], p.EpochEndRecord):
                assert resumed.epoch == 1
                assert kinds(epochs[1][:3]) == ["session_start", "epoch_start", "summary"]
            _, outcome = await turn(rig, "again")  # and the session goes on
            assert outcome.content == SUMMARY.content or outcome.content
            assert rig.session.epoch == 1
            assert not [r for e in verified(rig) for r in e if isinstance(r, p.CacheLossRecord)]
    else:
        pytest.fail("the switch never got past its file operations")
    assert outcomes == {"nothing decided", "decided, not done", "new epoch in place"}


async def test_resume_reads_only_the_current_epoch(tmp_path: Path) -> None:
    fake = FakeLlamaServer(script=[*FILL, SUMMARY, Reply(content="Four.")], n_ctx=N_CTX)
    async with open_rig(tmp_path, fake) as rig:
        rig.replay = False  # its log's files are removed by hand
        await filled(rig)
        await turn(rig, "four")
        records = list(rig.session.records)
        (folder(rig) / "0.jsonl").write_bytes(b"this epoch is ruined\n")
        (folder(rig) / "0.baseline.json").unlink()
        assert list((await rig.reopen()).records) == records
        (folder(rig) / "0.jsonl").unlink()  # gone altogether
        assert rig.store.exists(rig.session.id)
        assert list((await rig.reopen()).records) == records


async def test_tool_call_numbers_go_on_across_epochs(tmp_path: Path) -> None:
    clock = Reply(tool_calls=(("clock", "{}"),))
    script = [clock, Reply(content="Noon."), Reply(content="Fine."), SUMMARY, clock,
              Reply(content="Later.")]  # fmt: skip
    async with open_rig(tmp_path, FakeLlamaServer(script=script)) as rig:
        await turn(rig, "time?")
        await turn(rig, "and you?")
        await turn(rig, "time again?", new_epoch=True)  # the clock turn is summarised, not carried
        _zero, one = verified(rig)
        calls = [r.call for r in one if isinstance(r, p.ToolResultRecord)]
        assert calls == [2]
        assert [r.call for r in rig.tools.requests] == [1, 2]
        await rig.reopen()
        assert rig.session.state.next_call == 3
