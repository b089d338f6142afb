"""The inference client against the in-process fake: every event, every error, retries,
timeouts, the thinking cap, the slot gate, cancellation and the API key."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
import trio

from boxmaker import proto as p
from boxmaker.loopd.infer import (
    Client,
    Connect,
    Http,
    InferError,
    ProtocolError,
    Stream,
    Timeout,
    context_sizes,
    is_context_full,
)
from boxmaker.testing._render import render
from boxmaker.testing.fake_server import FakeLlamaServer, Fault, FaultKind, Reply, Timing
from boxmaker.testing.recording import Exchange

from ..helpers import EventLog, deadline, make_config

CLOCK = p.ToolSchema(
    name="clock",
    description="The current time.",
    parameters={"type": "object", "properties": {}},
)
REQUEST = p.ChatRequest(
    slot="main",
    messages=(p.SystemMessage("You are Boxmaker."), p.UserMessage("What time is it?")),
    tools=(CLOCK,),
)


def client_for(fake: FakeLlamaServer, config_text: str = "", **kwargs: Any) -> Client:
    kwargs.setdefault("rng", random.Random(7))
    return Client(make_config(config_text), transport=fake.mock_transport(), **kwargs)


async def ask(
    fake: FakeLlamaServer,
    config_text: str = "",
    *,
    retry: bool = True,
    request: p.ChatRequest = REQUEST,
    **kwargs: Any,
) -> tuple[EventLog, p.Completion]:
    log = EventLog()
    async with client_for(fake, config_text, **kwargs) as client:
        chat = client.chat_with_retry if retry else client.chat
        return log, await chat(request, log)


async def fails(
    fake: FakeLlamaServer, config_text: str = "", *, retry: bool = True
) -> tuple[EventLog, InferError]:
    log = EventLog()
    async with client_for(fake, config_text) as client:
        chat = client.chat_with_retry if retry else client.chat
        with pytest.raises(InferError) as caught:
            await chat(REQUEST, log)
    return log, caught.value


# --- the request ---------------------------------------------------------------------------


async def test_the_request_body_is_the_spec_s() -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")])
    await ask(fake, "[inference]\nthinking_cap = 512\ntemperature = 0.2\nseed = 9\n")
    assert fake.requests[0] == [
        {
            "messages": [
                {"role": "system", "content": "You are Boxmaker."},
                {"role": "user", "content": "What time is it?"},
            ],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "clock",
                        "description": "The current time.",
                        "parameters": {"type": "object", "properties": {}},
                    },
                }
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_progress": True,
            "cache_prompt": True,
            "id_slot": 0,
            "reasoning_budget_tokens": 512,
            "temperature": 0.2,
            "seed": 9,
            "max_tokens": 16384,
        }
    ]


async def test_thinking_off_sends_enable_thinking_false_and_no_budget() -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")])
    no_thinking = p.ChatRequest(slot="main", messages=REQUEST.messages, tools=(), thinking=False)
    await ask(fake, request=no_thinking)
    body = fake.requests[0][0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "reasoning_budget_tokens" not in body


async def test_the_logical_slot_maps_to_its_server_slot() -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")], n_slots=4)
    request = p.ChatRequest(slot="side", messages=REQUEST.messages, tools=())
    await ask(fake, "[slots]\nmain = 0\nside = 3\n", request=request)
    assert fake.requests[3][0]["id_slot"] == 3


# --- events --------------------------------------------------------------------------------


async def test_a_plain_answer_gives_progress_and_content_events() -> None:
    fake = FakeLlamaServer(script=[Reply(content="It is noon.")])
    log, completion = await ask(fake)
    total = completion.timings.prompt_n
    assert log.of(p.Progress) == [
        p.Progress(total=total, cache=0, processed=0),
        p.Progress(total=total, cache=0, processed=total),
    ]
    assert log.text() == "It is noon."
    assert completion.content == "It is noon."
    assert (completion.reasoning_content, completion.tool_calls) == (None, None)
    assert completion.finish_reason == "stop"
    assert completion.timings.cache_n == 0
    assert completion.timings.predicted_n == 5  # four tokens and the end of generation


async def test_a_long_prompt_reports_progress_per_batch() -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")], timing=Timing(batch_size=10))
    log, completion = await ask(fake)
    processed = [e.processed for e in log.of(p.Progress)]  # type: ignore[attr-defined]
    total = completion.timings.prompt_n
    assert total > 30
    assert processed == [*range(0, total, 10), total]


async def test_reasoning_events_and_tool_call_deltas() -> None:
    fake = FakeLlamaServer(
        script=[Reply(reasoning="Need the time.", tool_calls=(("clock", "{}"),))]
    )
    log, completion = await ask(fake)
    assert log.text(p.Reasoning) == "Need the time."
    assert completion.reasoning_tokens == len(log.of(p.Reasoning)) == 4
    first, second = log.of(p.ToolCallDelta)
    call_id = first.id  # type: ignore[attr-defined]
    assert len(call_id) == 32
    assert first == p.ToolCallDelta(index=0, id=call_id, name="clock", arguments="{")
    assert second == p.ToolCallDelta(index=0, id=None, name=None, arguments="}")
    assert completion.tool_calls == (p.ToolCall(id=call_id, name="clock", arguments="{}"),)
    assert completion.finish_reason == "tool_calls"


async def test_a_busy_server_slot_is_reported_as_waiting() -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")])
    fake.hold(0)
    log = EventLog()
    async with client_for(fake) as client, trio.open_nursery() as nursery:
        nursery.start_soon(client.chat_with_retry, REQUEST, log)
        await log.wait_for(p.Waiting)
        assert log.events == [p.Waiting(slot_busy=0)]
        fake.release(0)
    assert log.text() == "ok"


async def test_slots_endpoint_switched_off_is_not_an_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")], slots_endpoint=False)
    fake.hold(0)
    log = EventLog()
    async with client_for(fake) as client, trio.open_nursery() as nursery:
        nursery.start_soon(client.chat_with_retry, REQUEST, log)
        await trio.sleep(1)  # virtual: long after the late-headers check asked /slots
        assert ("GET", "/slots") in [(m, path) for m, path, _ in fake.received]
        fake.release(0)
    assert log.of(p.Waiting) == []
    assert log.text() == "ok"


async def test_a_request_answered_at_once_costs_no_slots_round_trip() -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")])
    await ask(fake)
    assert [(m, path) for m, path, _ in fake.received] == [("POST", "/v1/chat/completions")]


# --- the slot gate -------------------------------------------------------------------------


async def test_five_requests_on_one_slot_are_served_in_order_with_exact_ahead() -> None:
    fake = FakeLlamaServer(script=[Reply(content=f"answer {i}") for i in range(5)])
    fake.hold(0)  # keeps the first request inside the gate until every other one queued
    logs = [EventLog() for _ in range(5)]
    finished: list[int] = []

    async def one(i: int, client: Client) -> None:
        request = p.ChatRequest(slot="main", messages=(p.UserMessage(f"request {i}"),), tools=())
        completion = await client.chat_with_retry(request, logs[i])
        finished.append(i)
        assert completion.content == f"answer {i}"

    async with client_for(fake) as client, trio.open_nursery() as nursery:
        nursery.start_soon(one, 0, client)
        with deadline(10, "the first request's waiting event (the slot is held)"):
            await logs[0].wait_for(p.Waiting)
        for i in range(1, 5):
            nursery.start_soon(one, i, client)
            with deadline(10, f"request {i}'s queued event"):
                await logs[i].wait_for(p.Queued)
        fake.release(0)
    assert finished == [0, 1, 2, 3, 4]
    assert [log.of(p.Queued) for log in logs] == [[]] + [[p.Queued(ahead=i)] for i in range(1, 5)]
    served = [body["messages"][0]["content"] for body in fake.requests[0]]
    assert served == [f"request {i}" for i in range(5)]


async def test_two_slots_run_in_parallel(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeLlamaServer(
        script=[Reply(content="one two three"), Reply(content="one two three")],
        n_slots=2,
        timing=Timing(ms_per_token=100.0),
    )
    logs = [EventLog(), EventLog()]
    config = "[slots]\nmain = 0\nside = 1\n"
    async with client_for(fake, config) as client, trio.open_nursery() as nursery:
        for slot, log in zip(("main", "side"), logs, strict=True):
            request = p.ChatRequest(slot=slot, messages=REQUEST.messages, tools=())
            nursery.start_soon(client.chat_with_retry, request, log)
    assert trio.current_time() == pytest.approx(0.3)  # three tokens of 100 ms, side by side
    assert [log.of(p.Queued) for log in logs] == [[], []]


# --- errors and retries --------------------------------------------------------------------


async def test_retries_back_off_with_seeded_full_jitter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeLlamaServer(
        script=[Fault(FaultKind.CUT, after=4), Fault(FaultKind.LOADING), Reply(content="fine")]
    )
    log, completion = await ask(fake)
    jitter = random.Random(7)
    waits = [round(jitter.uniform(0, 500)), round(jitter.uniform(0, 1000))]
    retries = log.of(p.Retrying)
    assert [(r.attempt, r.after_ms) for r in retries] == [(2, waits[0]), (3, waits[1])]  # type: ignore[attr-defined]
    assert "closed before [DONE]" in retries[0].error  # type: ignore[attr-defined]
    assert "503" in retries[1].error  # type: ignore[attr-defined]
    assert trio.current_time() == pytest.approx(sum(waits) / 1000)
    assert completion.content == "fine"
    assert len(fake.requests[0]) == 3


async def test_a_retry_after_a_cut_succeeds_and_its_events_follow_the_retrying_event(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeLlamaServer(script=[Fault(FaultKind.CUT, after=4), Reply(content="Whole answer.")])
    log, completion = await ask(fake)
    [retrying] = log.of(p.Retrying)
    at = log.events.index(retrying)
    before = "".join(e.text for e in log.events[:at] if isinstance(e, p.Content))
    after = "".join(e.text for e in log.events[at:] if isinstance(e, p.Content))
    assert before == "Partial"  # what the cut attempt showed, to be dropped by the channel
    assert after == completion.content == "Whole answer."


@pytest.mark.parametrize(
    ("fault", "kind", "status"),
    [
        (Fault(FaultKind.STATUS, status=400), Http, 400),
        (Fault(FaultKind.CONTEXT_FULL), Http, 400),
        (Fault(FaultKind.STATUS, status=401), Http, 401),
        (Fault(FaultKind.SERVER_ERROR), Http, 500),
        (Fault(FaultKind.STATUS, status=501), Http, 501),
        (Fault(FaultKind.ERROR_EVENT, after=4), Stream, None),
    ],
    ids=["400", "context-full", "401", "500", "501", "error-event"],
)
async def test_failures_that_cannot_pass_are_not_retried(
    fault: Fault, kind: type, status: int | None
) -> None:
    fake = FakeLlamaServer(script=[fault, Reply(content="never")])
    log, error = await fails(fake)
    assert isinstance(error, kind)
    assert getattr(error, "status", None) == status
    assert log.of(p.Retrying) == []
    assert len(fake.requests[0]) == 1


async def test_the_context_full_400_is_recognised_and_no_other() -> None:
    _log, full = await fails(FakeLlamaServer(script=[Fault(FaultKind.CONTEXT_FULL)]))
    _log, other = await fails(FakeLlamaServer(script=[Fault(FaultKind.STATUS, status=400)]))
    assert is_context_full(full)
    assert not is_context_full(other)
    assert not is_context_full(Http(400, "not json"))
    assert not is_context_full(Connect("refused"))


async def test_max_attempts_is_respected(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeLlamaServer(script=[Fault(FaultKind.LOADING)] * 4)
    log, error = await fails(fake, "[inference]\nmax_attempts = 3\n")
    assert isinstance(error, Http)
    assert error.status == 503
    assert "Loading model" in error.body
    assert len(log.of(p.Retrying)) == 2
    assert len(fake.requests[0]) == 3


async def test_a_refused_connection_is_connect_and_is_retried(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log, error = await fails(FakeLlamaServer(script=[Fault(FaultKind.REFUSED)]), retry=False)
    assert isinstance(error, Connect)
    assert "Connection refused" in str(error)
    fake = FakeLlamaServer(script=[Fault(FaultKind.REFUSED), Reply(content="up again")])
    log, completion = await ask(fake)
    assert completion.content == "up again"
    assert len(log.of(p.Retrying)) == 1


async def test_an_error_event_mid_stream_is_a_stream_error() -> None:
    _log, error = await fails(FakeLlamaServer(script=[Fault(FaultKind.ERROR_EVENT, after=4)]))
    assert isinstance(error, Stream)
    assert error.type == "server_error"


async def test_bytes_that_are_not_the_wire_are_a_protocol_error_not_retried() -> None:
    garbage = Exchange(
        method="POST",
        path="/v1/chat/completions",
        request_headers=(),
        request_body=None,
        status=200,
        reason="OK",
        response_headers=(("Content-Type", "text/event-stream"),),
        response_body=b"data: {oops\n\n",
    )
    fake = FakeLlamaServer(exchanges=[garbage, garbage])
    log, error = await fails(fake)
    assert isinstance(error, ProtocolError)
    assert error.cut is False
    assert log.of(p.Retrying) == []


@pytest.mark.parametrize(
    ("fault", "phase", "seconds"),
    [
        (Fault(FaultKind.STALL, phase="connect"), "connect", 5.0),
        (Fault(FaultKind.STALL, phase="first_byte"), "first_byte", 600.0),
        (Fault(FaultKind.STALL, phase="idle", after=3), "idle", 60.0),
    ],
)
async def test_each_timeout_fires_in_its_phase(
    autojump_clock: trio.testing.MockClock, fault: Fault, phase: str, seconds: float
) -> None:
    fake = FakeLlamaServer(script=[fault])
    _log, error = await fails(fake, retry=False)
    assert isinstance(error, Timeout)
    assert (error.phase, error.seconds) == (phase, seconds)
    assert trio.current_time() == pytest.approx(seconds)
    assert fake.disconnects == 1


async def test_a_slot_busy_past_the_first_byte_timeout_times_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="late")])
    fake.hold(0)
    log, error = await fails(fake, "[server]\nfirst_byte_timeout_s = 30\n", retry=False)
    assert isinstance(error, Timeout)
    assert error.phase == "first_byte"
    assert trio.current_time() == pytest.approx(30.0)
    assert log.events == [p.Waiting(slot_busy=0)]


async def test_timeouts_are_retried(autojump_clock: trio.testing.MockClock) -> None:
    fake = FakeLlamaServer(script=[Fault(FaultKind.STALL, after=3), Reply(content="ok")])
    log, completion = await ask(fake)
    [retrying] = log.of(p.Retrying)
    assert "timed out (idle)" in retrying.error  # type: ignore[attr-defined]
    assert completion.content == "ok"


# --- the thinking cap ----------------------------------------------------------------------

LONG_THOUGHT = " ".join(f"step{i}" for i in range(300))


async def test_the_server_enforces_the_budget_and_the_completion_is_marked() -> None:
    fake = FakeLlamaServer(script=[Reply(reasoning=LONG_THOUGHT, content="Done.")])
    log, completion = await ask(fake, "[inference]\nthinking_cap = 20\n")
    assert fake.requests[0][0]["reasoning_budget_tokens"] == 20
    assert log.of(p.ThinkingCapped) == [p.ThinkingCapped(tokens=20)]
    assert completion.thinking_capped is True
    assert completion.reasoning_tokens == 20
    assert completion.content == "Done."
    assert len(fake.requests[0]) == 1


async def test_the_backstop_cancels_and_asks_again_without_thinking() -> None:
    fake = FakeLlamaServer(
        script=[Reply(reasoning=LONG_THOUGHT, content="Never seen."), Reply(content="Plain.")],
        timing=Timing(enforce_budget=False),
    )
    log, completion = await ask(fake, "[inference]\nthinking_cap = 64\n")
    first, second = fake.requests[0]
    assert first["reasoning_budget_tokens"] == 64
    assert second["chat_template_kwargs"] == {"enable_thinking": False}
    assert "reasoning_budget_tokens" not in second
    assert fake.disconnects == 1  # the runaway stream was closed
    assert len(log.of(p.Reasoning)) == 64 + 64 + 1  # cut as it passed the cap by the margin
    assert log.of(p.ThinkingCapped) == [p.ThinkingCapped(tokens=64)]
    assert completion.content == "Plain."
    assert completion.thinking_capped is True
    assert log.of(p.Retrying) == []


# --- cancellation --------------------------------------------------------------------------


async def test_cancelling_the_caller_closes_the_stream_and_only_cancelled_escapes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeLlamaServer(
        script=[Reply(content="one two three four five six")], timing=Timing(ms_per_token=50.0)
    )
    log = EventLog()
    async with client_for(fake) as client:
        with trio.CancelScope() as scope:

            def on_event(event: p.ChatEvent) -> None:
                log(event)
                if len(log.of(p.Content)) == 2:
                    scope.cancel()

            await client.chat_with_retry(REQUEST, on_event)
    assert scope.cancelled_caught
    assert fake.disconnects == 1
    assert fake.completed == 0
    assert log.text() == "one two"


async def test_cancelling_while_queued_leaves_the_gate_to_the_others() -> None:
    fake = FakeLlamaServer(script=[Reply(content="first"), Reply(content="third")])
    fake.hold(0)
    logs = [EventLog(), EventLog(), EventLog()]
    queued = trio.CancelScope()

    async def cancelled_one(client: Client) -> None:
        with queued:
            await client.chat_with_retry(REQUEST, logs[1])

    async with client_for(fake) as client, trio.open_nursery() as nursery:
        nursery.start_soon(client.chat_with_retry, REQUEST, logs[0])
        await logs[0].wait_for(p.Waiting)
        nursery.start_soon(cancelled_one, client)
        await logs[1].wait_for(p.Queued)
        nursery.start_soon(client.chat_with_retry, REQUEST, logs[2])
        await logs[2].wait_for(p.Queued)
        queued.cancel()
        fake.release(0)
    assert queued.cancelled_caught
    assert logs[1].events == [p.Queued(ahead=1)]
    assert logs[2].of(p.Queued) == [p.Queued(ahead=2)]
    assert (logs[0].text(), logs[2].text()) == ("first", "third")
    assert len(fake.requests[0]) == 2


# --- the API key ---------------------------------------------------------------------------

KEY = "sk-very-secret-4242"
KEYED = '[server]\napi_key_env = "BX_KEY"\n'


async def test_the_api_key_is_sent_from_the_named_variable() -> None:
    fake = FakeLlamaServer(script=[Reply(content="ok")], api_key=KEY)
    _log, completion = await ask(fake, KEYED, environ={"BX_KEY": KEY})
    assert completion.content == "ok"
    assert ("POST", "/v1/chat/completions") in [(m, path) for m, path, _h in fake.received]
    assert fake.received[-1][2]["authorization"] == f"Bearer {KEY}"


async def test_the_api_key_appears_in_no_error_repr_or_log(
    caplog: pytest.LogCaptureFixture, autojump_clock: trio.testing.MockClock
) -> None:
    caplog.set_level(logging.DEBUG)
    script = [
        Fault(FaultKind.STATUS, status=401),
        Fault(FaultKind.REFUSED),
        Fault(FaultKind.STALL, phase="first_byte"),
        Fault(FaultKind.ERROR_EVENT),
        Fault(FaultKind.CUT),
    ]
    fake = FakeLlamaServer(script=script, api_key=KEY)
    client = client_for(fake, KEYED, environ={"BX_KEY": KEY})
    seen = [repr(client), str(client)]
    async with client:
        for _ in script:
            log = EventLog()
            with pytest.raises(InferError) as caught:
                await client.chat(REQUEST, log)
            seen += [str(caught.value), repr(caught.value), *map(repr, log.events)]
    seen.append(caplog.text)
    assert caplog.text  # httpx logged the requests
    assert not [text for text in seen if KEY in text]


async def test_count_tokens_asks_the_server_s_tokenizer() -> None:
    from boxmaker.session import assemble_baseline

    baseline = assemble_baseline("You are Boxmaker.", None)
    fake = FakeLlamaServer()
    async with client_for(fake) as client:
        tokens = await client.count_tokens(baseline)
    method, path, _headers = fake.received[-1]
    assert (method, path) == ("POST", "/v1/chat/completions/input_tokens")
    assert tokens > 100  # the system message and the three tool schemas, rendered


async def test_the_context_full_400_names_the_prompt_and_the_context() -> None:
    fake = FakeLlamaServer(script=[Reply(content="never")], n_ctx=20)
    _log, full = await fails(fake)
    assert context_sizes(full) == (len(render(fake.requests[0][0])), 20)
    assert context_sizes(Http(400, '{"error":{"type":"exceed_context_size_error"}}')) is None
    assert context_sizes(Http(500, "{}")) is None


async def test_the_slot_s_context_is_asked_once_and_kept() -> None:
    fake = FakeLlamaServer(n_ctx=2048, n_slots=2)
    async with client_for(fake, "[slots]\nmain = 0\nother = 3\n") as client:
        assert await client.context_size("main") == 2048
        assert await client.context_size("other") == 2048  # server slot 3 % 2
        assert await client.context_size("main") == 2048
    assert [path for _method, path, _ in fake.received] == ["/slots", "/slots"]


async def test_a_refusal_tells_the_context_when_slots_cannot(
    autojump_clock: trio.testing.MockClock,
) -> None:
    fake = FakeLlamaServer(script=[Reply(content="never")], n_ctx=20, slots_endpoint=False)
    async with client_for(fake) as client:
        assert await client.context_size("main") is None  # 501: asked again next time
        with pytest.raises(Http):
            await client.chat_with_retry(REQUEST, EventLog())
        assert await client.context_size("main") == 20
    assert [path for _method, path, _ in fake.received].count("/slots") == 1


async def test_tokenize_counts_with_the_server_s_tokenizer() -> None:
    fake = FakeLlamaServer()
    async with client_for(fake) as client:
        assert await client.tokenize("one two, three") == 4
        fake.loading = True
        with pytest.raises(Http, match="503"):
            await client.tokenize("x")
