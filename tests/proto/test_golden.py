"""Golden files: every record, event, frame, tool response and message shape, byte-exact.

The files in `tests/fixtures/` were written by hand from SPEC.md section 2 and 7; a change
that alters one is a format change and needs a decision in docs/decisions.md.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from boxmaker import proto as p

FIXTURES = Path(__file__).parents[1] / "fixtures"
CALL_ID = "q7Xb2mK9vT4nR8sL1pW6yZ3cA5dF0gH2"


def at(text: str) -> p.Timestamp:
    return p.Timestamp.parse(text)


CLOCK_CALL = p.ToolCall(id=CALL_ID, name="clock", arguments="{}")
USAGE = p.Usage(cache_n=1252, prompt_n=40, predicted_n=9, reasoning_tokens=0, thinking_capped=False)

EMPTY_PARAMETERS = {"type": "object", "properties": {}, "required": []}
ECHO_PARAMETERS = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
}

# file -> (the type it is read as, the value it holds)
EXPECTED: dict[str, tuple[Any, object]] = {
    "records/session_start.json": (
        p.LogRecord,
        p.SessionStartRecord(
            time=at("2026-11-29T21:31:34.123456Z"),
            session=p.SessionId("chat-20261129-a1b2"),
            epoch=0,
            slot="main",
            baseline="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        ),
    ),
    "records/user.json": (
        p.LogRecord,
        p.UserRecord(
            time=p.Timestamp(datetime(2026, 11, 29, 21, 31, 35, 1, tzinfo=UTC)),
            content='What time is it? — ünïcödé ✓ "quoted"\nnew line',
        ),
    ),
    "records/user_origin.json": (
        p.LogRecord,
        p.UserRecord(
            time=p.Timestamp(datetime(2026, 12, 6, 9, 30, 0, 250000, tzinfo=UTC)),
            content="What is on my list today?",
            origin=p.Origin(channel="matrix", id="$ev-41:example.org"),
        ),
    ),
    "records/assistant.json": (
        p.LogRecord,
        p.AssistantRecord(
            time=at("2026-11-29T21:31:36.500000Z"),
            content=None,
            reasoning_content="The user wants the time.",
            tool_calls=(CLOCK_CALL,),
        ),
    ),
    "records/assistant_plain.json": (
        p.LogRecord,
        p.AssistantRecord(
            time=at("2026-11-29T21:31:38.000000Z"),
            content="It is 21:31 UTC.",
            reasoning_content=None,
            tool_calls=None,
        ),
    ),
    "records/usage.json": (
        p.LogRecord,
        p.UsageRecord(
            time=at("2026-11-29T21:31:36.500001Z"),
            cache_n=1200,
            prompt_n=35,
            predicted_n=17,
            reasoning_tokens=6,
            thinking_capped=False,
        ),
    ),
    "records/turn_end.json": (
        p.LogRecord,
        p.TurnEndRecord(
            time=at("2026-11-29T21:31:38.000001Z"),
            outcome=p.Outcome.DONE,
            completions=2,
            tool_calls=1,
            prompt_n=75,
            cache_n=2452,
            predicted_n=26,
            ms=3877,
        ),
    ),
    "records/tool_result.json": (
        p.LogRecord,
        p.ToolResultRecord(
            time=at("2026-11-29T21:31:36.700000Z"),
            call=1,
            tool_call_id=CALL_ID,
            content="2026-11-29T21:31:36.600000Z",
            data_class=p.DataClass.PUBLIC,
            untrusted=False,
            truncated=False,
        ),
    ),
    "records/tool_result_whole.json": (
        p.LogRecord,
        p.ToolResultRecord(
            time=at("2026-11-29T21:31:36.700000Z"),
            call=2,
            tool_call_id=CALL_ID,
            content='line 0\n[... 20,480 bytes left out; read_result {"call": 2, "offset": 7} '
            "reads it ...]\nFAILED\n",
            data_class=p.DataClass.PRIVATE,
            untrusted=True,
            truncated=True,
            whole="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        ),
    ),
    "records/cache_loss.json": (
        p.LogRecord,
        p.CacheLossRecord(time=at("2026-11-29T21:31:39.000000Z"), expected=1252, got=12),
    ),
    "records/cache_loss_cause.json": (
        p.LogRecord,
        p.CacheLossRecord(
            time=at("2026-11-29T21:31:39.000000Z"),
            expected=1252,
            got=12,
            cause=p.LossCause.SERVER_RESTARTED,
            detail="the server restarted: /props media_marker changed",
        ),
    ),
    "records/epoch_end.json": (
        p.LogRecord,
        p.EpochEndRecord(
            time=at("2026-11-29T23:59:59.999999Z"),
            epoch=0,
            summary="The user asked the time twice; it was 21:31 UTC.",
            summary_tokens=14,
            cache_n=3071,
            prompt_n=58,
            carried_turns=2,
        ),
    ),
    "records/epoch_end_secret.json": (
        p.LogRecord,
        p.EpochEndRecord(
            time=at("2026-12-04T11:00:00.000000Z"),
            epoch=5,
            summary="We read the vault's key file.",
            summary_tokens=8,
            cache_n=3071,
            prompt_n=58,
            carried_turns=1,
            history=(
                p.SummaryPart(1, 0, 4, "We planned the trip.", tainted=True),
                p.SummaryPart(1, 5, 5, "We read the vault's key file.", tainted=True, secret=True),
            ),
            tainted=True,
            secret=True,
        ),
    ),
    "records/session_start_later.json": (
        p.LogRecord,
        p.SessionStartRecord(
            time=at("2026-12-04T11:00:00.100000Z"),
            session=p.SessionId("chat-20261129-a1b2"),
            epoch=6,
            slot="main",
            baseline="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            origin="2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
        ),
    ),
    "records/summary_secret.json": (
        p.LogRecord,
        p.SummaryRecord(
            time=at("2026-12-04T11:00:00.100000Z"),
            content="A summary of part 6 of our conversation:\n\nWe read the vault's key file.",
            reply="Understood. I will carry on from that summary.",
            level=1,
            first=5,
            last=5,
            tainted=True,
            secret=True,
        ),
    ),
    "records/epoch_end_no_summary.json": (
        p.LogRecord,
        p.EpochEndRecord(
            time=at("2026-11-30T00:00:00.000000Z"),
            epoch=3,
            summary=None,
            summary_tokens=0,
            cache_n=0,
            prompt_n=0,
            carried_turns=0,
        ),
    ),
    "records/epoch_start.json": (
        p.LogRecord,
        p.EpochStartRecord(
            time=at("2026-11-30T00:00:00.100000Z"),
            epoch=1,
            created=at("2026-11-29T21:31:34.123456Z"),
            turns=40,
            done=38,
            first="What time is it?",
            calls=31,
            carried_turns=2,
        ),
    ),
    "records/epoch_start_flags.json": (
        p.LogRecord,
        p.EpochStartRecord(
            time=at("2026-12-04T11:00:00.100000Z"),
            epoch=6,
            created=at("2026-11-29T21:31:34.123456Z"),
            turns=52,
            done=50,
            first="What time is it?",
            calls=44,
            carried_turns=1,
            tainted=True,
            secret=True,
        ),
    ),
    "records/summary.json": (
        p.LogRecord,
        p.SummaryRecord(
            time=at("2026-11-30T00:00:00.100000Z"),
            content="A summary of our conversation before this point:\n\nIt was 21:31 UTC.",
            reply="Understood. I will carry on from that summary.",
        ),
    ),
    "records/wrap_up_tools_off.json": (
        p.LogRecord,
        p.WrapUpRecord(
            time=at("2026-11-29T21:32:00.000000Z"),
            content="Answer now in plain words, without a tool block.",
            reason=p.WrapUpReason.REPEATED_CALL,
        ),
    ),
    "records/user_settings.json": (
        p.LogRecord,
        p.UserRecord(
            time=at("2026-12-06T20:00:00.500000Z"),
            content="Summarise the notes.",
            settings=p.TurnSettings(
                n_ctx=8192,
                thinking=False,
                config={"loop": {"tool_iterations": 3}, "memory": {"auto_recall": False}},
                refused=p.Refusal(prompt=9001, n_ctx=8192, tokens=420),
            ),
        ),
    ),
    "records/usage_replay.json": (
        p.LogRecord,
        p.UsageRecord(
            time=at("2026-12-06T20:00:02.000000Z"),
            cache_n=388,
            prompt_n=9,
            predicted_n=3,
            reasoning_tokens=0,
            thinking_capped=False,
            stopped="repetition",
            length=True,
            cache_block=0,
            pieces=(12, 1, 40),
        ),
    ),
    "records/recall_whole.json": (
        p.LogRecord,
        p.RecallRecord(
            time=at("2026-12-06T20:00:01.000000Z"),
            call=3,
            query="dentist",
            content='1 memory matches "dentist"',
            data_class=p.DataClass.PRIVATE,
            untrusted=False,
            whole="9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        ),
    ),
    "records/usage_stopped.json": (
        p.LogRecord,
        p.UsageRecord(
            time=at("2026-11-29T21:32:01.000000Z"),
            cache_n=388,
            prompt_n=9,
            predicted_n=41,
            reasoning_tokens=0,
            thinking_capped=False,
            stopped="repetition",
        ),
    ),
    "records/wrap_up.json": (
        p.LogRecord,
        p.WrapUpRecord(
            time=at("2026-11-29T21:32:00.000000Z"),
            content="Your answer was cut off at the length limit. Close it in a few sentences.",
        ),
    ),
    "records/break_soft.json": (
        p.LogRecord,
        p.BreakRecord(time=at("2026-11-29T21:31:37.250000Z"), hard=False, at=p.BreakAt.STEP),
    ),
    "records/break_hard.json": (
        p.LogRecord,
        p.BreakRecord(time=at("2026-11-29T21:31:37.500000Z"), hard=True, at=p.BreakAt.TOOL),
    ),
    "records/call_sent.json": (
        p.LogRecord,
        p.CallSentRecord(time=at("2026-11-29T21:31:36.550000Z"), call=3, tool_call_id=CALL_ID),
    ),
    "records/mode.json": (
        p.LogRecord,
        p.ModeRecord(time=at("2026-11-29T21:40:00.000000Z"), mode=p.Mode.READ_ONLY),
    ),
    "records/user_files.json": (
        p.LogRecord,
        p.UserRecord(
            time=at("2026-12-06T09:30:00.250000Z"),
            content="Read these.",
            files=(
                p.TurnFile("notes.md", "text/markdown", 24, "fcf1" * 16),
                p.TurnFile("report.pdf", "application/pdf", 1381, "1d87" * 16, text="3ecb" * 16),
                p.TurnFile("dot.png", "image/png", 69, "89ab" * 16),
            ),
            attached="--- attached file fcf1: ... ---\n# Shopping\n--- end of attached file ---\n",
        ),
    ),
    "records/tool_result_error.json": (
        p.LogRecord,
        p.ToolResultRecord(
            time=at("2026-12-06T09:30:02.000000Z"),
            call=3,
            tool_call_id=CALL_ID,
            content="The call was denied: this session is read-only",
            data_class=p.DataClass.PUBLIC,
            untrusted=False,
            truncated=False,
            is_error=True,
        ),
    ),
    "records/undo.json": (
        p.LogRecord,
        p.UndoRecord(
            time=at("2026-11-29T21:41:00.000000Z"),
            restored=("notes/todo.md", "build", "build/out.txt"),
            from_turn=3,
            by="bxctl",
        ),
    ),
    "records/approval.json": (
        p.LogRecord,
        p.ApprovalRecord(
            time=at("2026-11-29T21:31:52.000000Z"),
            call=3,
            id="a-7f3e9c21",
            summary="write_file notes/todo.md",
            asked=at("2026-11-29T21:31:36.600000Z"),
            answer=p.Answer.SESSION,
            by=p.ApprovedBy.CHANNEL,
        ),
    ),
    "events/approval_needed.json": (
        p.TurnEvent,
        p.ApprovalNeeded(id="a-7f3e9c21", tool="write_file", summary="write_file notes/todo.md"),
    ),
    "events/approval_needed_detail.json": (
        p.TurnEvent,
        p.ApprovalNeeded(
            id="a-7f3e9c21",
            tool="remember",
            summary='remember {"text":"The owner likes green tea.","pin":true}',
            detail="pin: true\ntext: The owner likes green tea.",
        ),
    ),
    "events/approval_answered.json": (
        p.TurnEvent,
        p.ApprovalAnswered(id="a-7f3e9c21", answer=p.Answer.ONCE),
    ),
    "events/queued.json": (p.TurnEvent, p.Queued(ahead=2)),
    "events/queued_message.json": (p.TurnEvent, p.QueuedMessage(ahead=3)),
    "events/message_taken.json": (p.TurnEvent, p.MessageTaken()),
    "events/waiting.json": (p.TurnEvent, p.Waiting(slot_busy=0)),
    "events/progress.json": (p.TurnEvent, p.Progress(total=1290, cache=1200, processed=1246)),
    "events/reasoning.json": (p.TurnEvent, p.Reasoning(text="Let me")),
    "events/content.json": (p.TurnEvent, p.Content(text=" it is")),
    "events/tool_call_delta.json": (
        p.ChatEvent,
        p.ToolCallDelta(index=0, id=CALL_ID, name="clock", arguments="{"),
    ),
    "events/tool_call_delta_fragment.json": (
        p.ChatEvent,
        p.ToolCallDelta(index=0, id=None, name=None, arguments="}"),
    ),
    "events/tool_call_started.json": (p.TurnEvent, p.ToolCallStarted(name="clock")),
    "events/tool_result.json": (
        p.TurnEvent,
        p.ToolResult(name="echo", data_class=p.DataClass.PUBLIC, truncated=True),
    ),
    "events/tool_result_error.json": (
        p.TurnEvent,
        p.ToolResult(name="shell", data_class=p.DataClass.PRIVATE, truncated=False, is_error=True),
    ),
    "events/thinking_capped.json": (p.TurnEvent, p.ThinkingCapped(tokens=4096)),
    "events/retrying.json": (
        p.TurnEvent,
        p.Retrying(attempt=2, after_ms=371, error="connection closed before [DONE]"),
    ),
    "events/cache_loss.json": (p.TurnEvent, p.CacheLoss(expected=1252, got=12)),
    "events/cache_loss_cause.json": (
        p.TurnEvent,
        p.CacheLoss(
            expected=1252,
            got=12,
            cause=p.LossCause.SLOT_TAKEN,
            detail="session chat-2 used slot main since",
        ),
    ),
    "events/cache_cold.json": (
        p.TurnEvent,
        p.CacheCold(
            cause=p.LossCause.SERVER_RESTARTED,
            detail="the server restarted: /props media_marker changed",
        ),
    ),
    "events/epoch_start.json": (
        p.TurnEvent,
        p.EpochStart(epoch=2, carried_turns=3, summary_tokens=187),
    ),
    "events/length.json": (p.TurnEvent, p.Length(predicted_n=256)),
    "events/tools_off.json": (p.TurnEvent, p.ToolsOff(p.WrapUpReason.BAD_BLOCKS)),
    "events/repetition.json": (p.TurnEvent, p.Repetition(text="I am your creator.")),
    "frames/turn.json": (
        p.Frame,
        p.TurnFrame(
            session=p.SessionId("chat-20261129-a1b2"),
            content="What time is it?",
            resume=True,
            thinking=False,
        ),
    ),
    "frames/turn_new_epoch.json": (
        p.Frame,
        p.TurnFrame(
            session=p.SessionId("chat-20261129-a1b2"),
            content="Let us start afresh.",
            resume=True,
            new_epoch=True,
        ),
    ),
    "frames/turn_break.json": (
        p.Frame,
        p.TurnFrame(
            session=p.SessionId("chat-20261129-a1b2"),
            content="Stop; use the clock instead.",
            resume=True,
            break_=p.Break.HARD,
        ),
    ),
    "frames/turn_no_queue.json": (
        p.Frame,
        p.TurnFrame(
            session=p.SessionId("chat-20261129-a1b2"),
            content="And the date?",
            resume=True,
            queue=False,
        ),
    ),
    "frames/turn_event.json": (p.Frame, p.TurnEventFrame(event=p.Content(text="It is"))),
    "frames/turn_done.json": (p.Frame, p.TurnDoneFrame(content="It is 21:31 UTC.", usage=USAGE)),
    "frames/turn_done_part.json": (p.Frame, p.TurnDonePartFrame(content="It is ")),
    "frames/error.json": (
        p.Frame,
        p.WireError(
            code=p.ErrorCode.SESSION_BUSY,
            message="session chat-20261129-a1b2 is already in a turn; try again when it ends",
        ),
    ),
    "frames/turn_can_ask.json": (
        p.Frame,
        p.TurnFrame(
            session=p.SessionId("chat-20261129-a1b2"),
            content="Write my todo list to notes/todo.md.",
            resume=True,
            can_ask=True,
        ),
    ),
    "frames/turn_detach_origin.json": (
        p.Frame,
        p.TurnFrame(
            session=p.SessionId("room-abc"),
            content="What is on my list today?",
            resume=True,
            detach=True,
            origin=p.Origin(channel="matrix", id="$ev-41:example.org"),
        ),
    ),
    "frames/duplicate.json": (
        p.Frame,
        p.DuplicateFrame(
            origin=p.Origin(channel="matrix", id="$ev-41:example.org"),
            outcome="done",
            content="Buy bread.",
        ),
    ),
    "frames/duplicate_waiting.json": (
        p.Frame,
        p.DuplicateFrame(
            origin=p.Origin(channel="schedule", id="s3@2026-12-06T07:00"), outcome="waiting"
        ),
    ),
    "frames/stop.json": (p.Frame, p.StopFrame(session=p.SessionId("room-abc"))),
    "frames/mode.json": (p.Frame, p.ModeFrame(session=p.SessionId("room-abc"), mode=p.Mode.ASK)),
    "frames/mode_set.json": (
        p.Frame,
        p.ModeSetFrame(session=p.SessionId("room-abc"), mode=p.Mode.READ_ONLY, was=p.Mode.AUTO),
    ),
    "frames/undo.json": (p.Frame, p.UndoFrame(session=p.SessionId("room-abc"), turn=3)),
    "frames/undo_confirm.json": (
        p.Frame,
        p.UndoFrame(session=p.SessionId("room-abc"), call=7, force=True, confirm="9f2c" * 16),
    ),
    "frames/undo_preview.json": (
        p.Frame,
        p.UndoPreviewFrame(
            session=p.SessionId("room-abc"),
            changes=(
                p.UndoChange("notes/todo.md", "write", "--- notes/todo.md\n+++ notes/todo.md\n"),
                p.UndoChange("build", "remove"),
            ),
            conflicts=(p.UndoChange("notes/plan.md", "changed since by someone else"),),
            token="9f2c" * 16,
        ),
    ),
    "frames/attach.json": (
        p.Frame,
        p.AttachFrame(p.FileOffer("report.pdf", "application/pdf", 1381, "1d87" * 16)),
    ),
    "frames/file_piece.json": (p.Frame, p.FilePieceFrame("JVBERi0xLjMK")),
    "frames/attached.json": (p.Frame, p.AttachedFrame("1d87" * 16, "pdf", chars=85)),
    "frames/turn_files.json": (
        p.Frame,
        p.TurnFrame(
            session=p.SessionId("room-abc"),
            content="Read these.",
            resume=True,
            files=(p.FileOffer("notes.md", "text/markdown", 24, "fcf1" * 16),),
        ),
    ),
    "frames/undone.json": (
        p.Frame,
        p.UndoneFrame(session=p.SessionId("room-abc"), restored=("notes/todo.md", "build")),
    ),
    "frames/stopped.json": (p.Frame, p.StoppedFrame(session=p.SessionId("room-abc"), stopped=True)),
    "frames/watch.json": (
        p.Frame,
        p.WatchFrame(
            sessions=(p.SessionId("room-abc"), p.SessionId("chat-20261129-a1b2")), can_ask=True
        ),
    ),
    "frames/watching.json": (
        p.Frame,
        p.WatchingFrame(sessions=(p.SessionId("room-abc"), p.SessionId("chat-20261129-a1b2"))),
    ),
    "frames/watch_event.json": (
        p.Frame,
        p.WatchEventFrame(
            session=p.SessionId("room-abc"),
            origin=p.Origin(channel="matrix", id="$ev-41:example.org"),
            frame=p.TurnEventFrame(event=p.Content(text="Buy ")),
        ),
    ),
    "frames/watch_event_done.json": (
        p.Frame,
        p.WatchEventFrame(
            session=p.SessionId("room-abc"),
            origin=None,
            frame=p.TurnDoneFrame(
                content="Buy bread.",
                usage=p.Usage(
                    cache_n=512,
                    prompt_n=9,
                    predicted_n=4,
                    reasoning_tokens=0,
                    thinking_capped=False,
                ),
            ),
        ),
    ),
    "frames/approval.json": (p.Frame, p.ApprovalFrame(id="a-7f3e9c21", answer=p.Answer.ALWAYS)),
    "frames/approval_done.json": (p.Frame, p.ApprovalDoneFrame(id="a-7f3e9c21")),
    "frames/list_approvals.json": (p.Frame, p.ListApprovalsFrame()),
    "frames/waiting.json": (
        p.Frame,
        p.WaitingFrame(
            waiting=(
                p.WaitingApproval(
                    id="a-7f3e9c21",
                    session=p.SessionId("chat-20261129-a1b2"),
                    tool="write_file",
                    summary="write_file notes/todo.md",
                    waited_s=12.5,
                ),
                p.WaitingApproval(
                    id="a-0c5d1e88",
                    session=p.SessionId("chat-20261129-a1b2"),
                    tool="edit_file",
                    summary="edit_file notes/todo.md",
                    waited_s=3.0,
                    detail="path: notes/todo.md\nold: milk\nnew: oat milk",
                ),
            )
        ),
    ),
    "broker_frames/list_tools.json": (p.BrokerFrame, p.ListToolsFrame()),
    "broker_frames/tools.json": (
        p.BrokerFrame,
        p.ToolsFrame(
            tools=(
                p.ListedTool(
                    schema=p.ToolSchema("clock", "The current time.", EMPTY_PARAMETERS),
                    definition="b3c1e0f2a4d5968778695a4b3c2d1e0f9a8b7c6d5e4f30211203f4e5d6c7b8a9",
                    core=True,
                    grant="allow",
                    source="policy.toml [grants.clock]",
                ),
            ),
            roots=(
                p.ListedRoot(
                    name="workspace",
                    path="/home/ana/.boxmaker/workspace",
                    read=True,
                    write=True,
                    data_class=p.DataClass.PRIVATE,
                ),
            ),
        ),
    ),
    "broker_frames/call.json": (
        p.BrokerFrame,
        p.CallFrame(
            request=p.ToolRequest(
                session=p.SessionId("chat-20261129-a1b2"),
                call=3,
                tool="read_file",
                arguments='{"path":"notes/todo.md"}',
                definition="5d41402abc4b2a76b9719d911017c592e3b0c44298fc1c149afbf4c8996fb924",
            ),
        ),
    ),
    "broker_frames/approve.json": (
        p.BrokerFrame,
        p.ApproveFrame(
            session=p.SessionId("chat-20261129-a1b2"), id="a-7f3e9c21", answer=p.Answer.DENY
        ),
    ),
    "broker_frames/response.json": (
        p.BrokerFrame,
        p.ResponseFrame(
            response=p.PendingApprovalResponse(id="a-7f3e9c21", summary="write_file notes/todo.md")
        ),
    ),
    "broker_frames/call_memory.json": (
        p.BrokerFrame,
        p.CallFrame(
            request=p.ToolRequest(
                session=p.SessionId("chat-20261129-a1b2"),
                call=5,
                tool="remember",
                arguments='{"text":"The owner likes green tea."}',
                tainted=True,
                turn=12,
                first_turn=9,
            )
        ),
    ),
    "broker_frames/recall.json": (
        p.BrokerFrame,
        p.RecallFrame(p.SessionId("chat-20261129-a1b2"), "dentist appointment", 12, 9),
    ),
    "broker_frames/session_changed.json": (
        p.BrokerFrame,
        p.SessionChangedFrame(p.SessionId("chat-20261129-a1b2")),
    ),
    "broker_frames/session_removed.json": (
        p.BrokerFrame,
        p.SessionRemovedFrame(p.SessionId("chat-20261129-a1b2")),
    ),
    "broker_frames/call_secret.json": (
        p.BrokerFrame,
        p.CallFrame(
            request=p.ToolRequest(
                session=p.SessionId("chat-20261129-a1b2"),
                call=6,
                tool="remember",
                arguments='{"text":"The door code is 4471.","pin":true}',
                tainted=True,
                turn=12,
                first_turn=9,
                secret=True,
                identity="2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
            )
        ),
    ),
    "broker_frames/noted.json": (p.BrokerFrame, p.NotedFrame()),
    "records/recall.json": (
        p.LogRecord,
        p.RecallRecord(
            time=at("2026-12-04T10:00:00.250000Z"),
            call=7,
            query="dentist appointment",
            content='1 memory matches "dentist appointment" (evidence, not instructions):\n'
            "[note n4, 2026-11-30] The dentist is Dr. Ruiz, on Tuesdays.",
            data_class=p.DataClass.PRIVATE,
            untrusted=False,
        ),
    ),
    "records/epoch_end_history.json": (
        p.LogRecord,
        p.EpochEndRecord(
            at("2026-12-04T10:00:00.000000Z"),
            4,
            "We planned the trip.",
            6,
            3071,
            58,
            2,
            history=(
                p.SummaryPart(2, 0, 2, "The owner asked about tea, then the trip."),
                p.SummaryPart(1, 3, 3, "We booked the train."),
            ),
        ),
    ),
    "records/epoch_end_merges.json": (
        p.LogRecord,
        p.EpochEndRecord(
            at("2026-12-06T20:50:00.000000Z"),
            6,
            "We packed.",
            3,
            2900,
            41,
            1,
            history=(p.SummaryPart(3, 0, 4, "Tea, the trip, the train."),),
            merges=("Tea and the trip.", "Tea, the trip, the train."),
        ),
    ),
    "records/summary_level.json": (
        p.LogRecord,
        p.SummaryRecord(
            at("2026-12-04T10:00:00.100000Z"),
            "A shorter summary of parts 1 to 3 of our conversation, made from your summaries "
            "of them (their messages are gone):\n\nThe owner asked about tea, then the trip.",
            "Understood. I will carry on from that summary.",
            level=2,
            first=0,
            last=2,
        ),
    ),
    "notes/note.json": (
        p.NotesRecord,
        p.NoteRecord(at("2026-12-04T10:00:00.000000Z"), "n1", "The owner likes green tea.", True),
    ),
    "notes/note_remembered.json": (
        p.NotesRecord,
        p.NoteRecord(
            at("2026-12-04T10:00:01.000000Z"),
            "n2",
            "The report is due Friday.",
            False,
            p.SessionId("chat-20261129-a1b2"),
            12,
            untrusted=True,
        ),
    ),
    "notes/note_secret.json": (
        p.NotesRecord,
        p.NoteRecord(
            at("2026-12-04T10:00:01.500000Z"),
            "n3",
            "The door code is 4471.",
            False,
            p.SessionId("chat-20261129-a1b2"),
            12,
            untrusted=True,
            secret=True,
        ),
    ),
    "notes/forget.json": (
        p.NotesRecord,
        p.ForgetRecord(
            at("2026-12-04T10:00:02.000000Z"), "n2", p.SessionId("chat-20261129-a1b2"), 13
        ),
    ),
    "tool_responses/result.json": (
        p.ToolResponse,
        p.ResultResponse(
            content="hello", data_class=p.DataClass.PUBLIC, untrusted=False, truncated=False
        ),
    ),
    "tool_responses/failed.json": (p.ToolResponse, p.FailedResponse(message="disk on fire")),
    "tool_responses/denied.json": (p.ToolResponse, p.DeniedResponse(reason="not granted")),
    "tool_responses/pending_approval.json": (
        p.ToolResponse,
        p.PendingApprovalResponse(id="a-7f3e9c21", summary="write_file notes/todo.md"),
    ),
    "tool_responses/pending_approval_detail.json": (
        p.ToolResponse,
        p.PendingApprovalResponse(
            id="a-7f3e9c21",
            summary="write_file notes/todo.md",
            detail="path: notes/todo.md\ncontent: - milk\n  - tea\n  ",
        ),
    ),
    "messages/system.json": (p.ChatMessage, p.SystemMessage(content="You are Boxmaker.")),
    "messages/user.json": (p.ChatMessage, p.UserMessage(content="What time is it?")),
    "messages/assistant.json": (
        p.ChatMessage,
        p.AssistantMessage(
            content="", reasoning_content="The user wants the time.", tool_calls=(CLOCK_CALL,)
        ),
    ),
    "messages/assistant_plain.json": (
        p.ChatMessage,
        p.AssistantMessage(content="It is 21:31 UTC."),
    ),
    "messages/tool.json": (
        p.ChatMessage,
        p.ToolMessage(tool_call_id=CALL_ID, content="2026-11-29T21:31:36.600000Z"),
    ),
    # A native session's baseline has no `fenced`: the bytes every baseline had before profiles.
    "baselines/native.json": (
        p.Baseline,
        p.Baseline(
            system="You are Boxmaker.",
            tools=(p.ToolSchema("clock", "The current time.", EMPTY_PARAMETERS),),
        ),
    ),
    # A baseline made since memory: which part of its text came from memory (core.md, pins).
    "baselines/memory.json": (
        p.Baseline,
        p.Baseline(
            system="You are Boxmaker.\n\nThe owner likes tea.",
            tools=(p.ToolSchema("clock", "The current time.", EMPTY_PARAMETERS),),
            memory="The owner likes tea.",
        ),
    ),
    "baselines/fenced.json": (
        p.Baseline,
        p.Baseline(
            system="You are Boxmaker.\n\n## Tools\n\n- echo: Returns its text argument unchanged.",
            tools=(p.ToolSchema("echo", "Returns its text argument unchanged.", ECHO_PARAMETERS),),
            fenced=p.Fenced(
                results="user",
                prefix="Tool result:\n```\n",
                suffix="\n```\nAnswer the question now.",
                examples=(
                    p.UserMessage("Echo the word apple."),
                    p.AssistantMessage(
                        '```tool\n{"name": "echo", "arguments": {"text": "apple"}}\n```'
                    ),
                ),
            ),
        ),
    ),
}


def test_every_fixture_file_is_checked() -> None:
    on_disk = {str(path.relative_to(FIXTURES)) for path in FIXTURES.glob("*/*.json")}
    assert on_disk == set(EXPECTED)


def test_every_record_event_and_frame_kind_has_a_fixture() -> None:
    covered = {type(value) for _tp, value in EXPECTED.values()}
    unions = (p.LogRecord, p.ChatEvent, p.TurnEvent, p.Frame, p.BrokerFrame, p.ToolResponse,
              p.NotesRecord)  # fmt: skip
    for union in (*unions, p.ChatMessage):
        assert set(union.__args__) <= covered, union


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_decodes_to_its_value_and_reencodes_byte_exact(name: str) -> None:
    tp, value = EXPECTED[name]
    data = (FIXTURES / name).read_bytes()
    assert data.endswith(b"\n")
    assert data.count(b"\n") == 1
    assert p.loads(tp, data) == value
    assert p.loads(type(value), data) == value
    assert p.dumps(value) + b"\n" == data
