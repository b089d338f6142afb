"""How bxctl chat shows a turn: on a TTY with colour, on a TTY without, and piped."""

from __future__ import annotations

from boxmaker import proto as p
from boxmaker.cli.render import CLEAR_LINE, DIM, RESET, Renderer

DONE = p.TurnDoneFrame("Hello there.", p.Usage(0, 10, 3, 0, False))


def show(renderer: Renderer, *events: p.TurnEvent) -> str:
    return "".join(renderer.event(e) for e in events)


def test_piped_output_is_plain_text_with_marked_reasoning_and_status_lines() -> None:
    r = Renderer(tty=False, color=False)
    out = show(
        r,
        p.Progress(total=100, cache=0, processed=50),
        p.Reasoning("Let me "),
        p.Reasoning("think."),
        p.Content("Hello"),
        p.ToolCallStarted("clock"),
        p.ToolResult("clock", p.DataClass.PUBLIC, False),
        p.Content("It is noon."),
        p.CacheLoss(expected=1200, got=12),
        p.ThinkingCapped(tokens=4096),
        p.Waiting(slot_busy=0),
        p.Queued(ahead=2),
    )
    out += r.done(DONE)
    assert out == (
        "[thinking] Let me think.\n"
        "Hello\n"
        "[tool] clock ... done\n"
        "It is noon.\n"
        "[cache: the server reused 12 of 1200 prompt tokens; it recomputed the rest]\n"
        "[thinking capped at 4096 tokens]\n"
        "[waiting: the server's slot 0 is busy with another client]\n"
        "[queued behind 2 requests]\n"
    )


def test_a_truncated_tool_result_says_so() -> None:
    r = Renderer(tty=False, color=False)
    out = show(
        r, p.ToolCallStarted("call_tool"), p.ToolResult("call_tool", p.DataClass.PUBLIC, True)
    )
    assert out == "[tool] call_tool ... done, cut to the size limit\n"


def test_a_result_of_the_owners_files_says_its_class() -> None:
    r = Renderer(tty=False, color=False)
    out = show(
        r, p.ToolCallStarted("read_file"), p.ToolResult("read_file", p.DataClass.PRIVATE, False)
    )
    assert out == "[tool] read_file ... done (private)\n"


def test_a_result_that_is_an_error_says_failed() -> None:
    r = Renderer(tty=False, color=False)
    failed = p.ToolResult("shell", p.DataClass.PUBLIC, False, is_error=True)
    assert show(r, p.ToolCallStarted("shell"), failed) == "[tool] shell ... failed\n"


def test_an_approval_is_a_status_line() -> None:
    r = Renderer(tty=False, color=False)
    out = show(r, p.ApprovalNeeded("a-1", "write_file", "write_file notes/todo.md"))
    assert out == "[approval: write_file notes/todo.md waits for the owner]\n"
    assert show(r, p.ApprovalAnswered("a-1", p.Answer.ONCE)) == "[approval: once]\n"


def test_piped_retrying_says_the_text_above_is_dropped() -> None:
    r = Renderer(tty=False, color=False)
    out = show(
        r,
        p.Content("Half an ans"),
        p.Retrying(2, 500, "the connection closed"),
        p.Content("Whole."),
    )
    assert out == (
        "Half an ans\n[the text above is dropped]\n"
        "[retrying (attempt 2) in 0.5 s: the connection closed]\nWhole."
    )


def test_on_a_colour_tty_reasoning_and_status_are_dimmed_and_the_status_line_is_live() -> None:
    r = Renderer(tty=True, color=True, unicode=False)
    r.waiting(10.0)
    out = r.event(p.Progress(total=100, cache=20, processed=60), now=10.5)
    out += r.event(p.Progress(total=100, cache=20, processed=100), now=11.0)
    out += show(r, p.Reasoning("Hm."), p.Content("Yes."), p.ThinkingCapped(tokens=8))
    assert out == (
        f"{CLEAR_LINE}{DIM}/ prompt 60 of 100 tokens (20 from the cache) - 0.5 s{RESET}"
        f"{CLEAR_LINE}{DIM}- prompt of 100 tokens done (20 from the cache); generating - 1.0 s"
        f"{RESET}{CLEAR_LINE}{DIM}Hm.{RESET}\nYes.\n{DIM}[thinking capped at 8 tokens]{RESET}\n"
    )


def test_the_status_line_moves_on_a_timer_and_leaves_no_trace_when_the_answer_starts() -> None:
    r = Renderer(tty=True, color=False)
    r.waiting(0.0)
    assert r.tick(0.2) == ""  # a quick answer never flashes a status line
    assert r.tick(0.4) == f"{CLEAR_LINE}⠼ processing the prompt · 0.4 s"
    assert r.tick(0.5) == f"{CLEAR_LINE}⠴ processing the prompt · 0.5 s"
    r.event(p.Progress(total=4096, cache=0, processed=2048), now=30.0)
    assert (
        r.tick(61.0) == f"{CLEAR_LINE}⠋ prompt 2048 of 4096 tokens (0 from the cache) · 1 min 01 s"
    )
    assert r.event(p.Content("Hi"), now=62.0) == f"{CLEAR_LINE}Hi"  # erased, then the answer
    assert r.tick(63.0) == ""
    assert r.event(p.ToolCallStarted("clock")) == "\n[tool] clock"
    r.event(p.ToolResult("clock", p.DataClass.PUBLIC, False), now=70.0)
    assert r.tick(71.0).endswith("processing the prompt · 1.0 s")  # the next completion's wait
    assert r.done(DONE) == CLEAR_LINE
    assert r.tick(72.0) == ""


def test_the_status_line_fits_the_terminal_and_never_shows_when_piped() -> None:
    narrow = Renderer(tty=True, color=False, width=20)
    narrow.waiting(0.0)
    assert narrow.tick(5.0) == f"{CLEAR_LINE}⠋ processing the pr"  # 19 of 20 columns
    piped = Renderer(tty=False, color=False)
    piped.waiting(0.0)
    assert piped.tick(5.0) == ""
    assert piped.event(p.Progress(total=9, cache=0, processed=1), now=6.0) == ""


def test_on_a_tty_retrying_erases_what_the_failed_attempt_showed() -> None:
    r = Renderer(tty=True, color=False, width=20)
    out = show(r, p.Content("first line\n" + "x" * 30), p.Retrying(2, 250, "cut"))
    # three rows: "first line", then 30 characters wrapped over two rows of 20
    assert out.endswith("\r\x1b[2A\x1b[J[retrying (attempt 2) in 0.25 s: cut]\n")
    one_row = Renderer(tty=True, color=False)
    assert show(one_row, p.Content("short"), p.Retrying(2, 1000, "x")).startswith("short\r\x1b[J")


def test_no_color_on_a_tty_keeps_live_lines_but_no_styles() -> None:
    r = Renderer(tty=True, color=False)
    r.waiting(0.0)
    out = r.event(p.Progress(total=9, cache=0, processed=9), now=1.0)
    out += show(r, p.Reasoning("a"), p.Content("b"))
    assert "\x1b[2m" not in out
    assert out == (
        f"{CLEAR_LINE}⠋ prompt of 9 tokens done (0 from the cache); generating · 1.0 s"
        f"{CLEAR_LINE}[thinking] a\nb"
    )


def test_an_error_ends_the_open_line_and_is_one_line() -> None:
    r = Renderer(tty=False, color=False)
    assert show(r, p.Content("Partial")) == "Partial"
    assert r.end() == "\n"
    error = p.WireError(p.ErrorCode.SESSION_BUSY, "session s1 is already in a turn")
    assert r.error(error) == "error: session_busy: session s1 is already in a turn\n"


def test_a_new_epoch_and_a_cut_answer_are_status_lines() -> None:
    r = Renderer(tty=False, color=False)
    out = show(
        r,
        p.EpochStart(epoch=2, carried_turns=1, summary_tokens=87),
        p.Content("Partly"),
        p.Length(predicted_n=256),
        p.EpochStart(epoch=3, carried_turns=0, summary_tokens=0),
    )
    assert out == (
        "[epoch 2: the conversation goes on from a summary of 87 tokens and 1 turn carried over]\n"
        "Partly\n"
        "[the answer was cut at 256 tokens (max_tokens)]\n"
        "[epoch 3: the conversation goes on from no summary and 0 turns carried over]\n"
    )
    colored = Renderer(tty=True, color=True).event(p.Length(predicted_n=9))
    assert colored == f"{DIM}[the answer was cut at 9 tokens (max_tokens)]{RESET}\n"


def test_the_mailbox_and_a_taken_message_are_status_lines_and_pause_closes_the_line() -> None:
    r = Renderer(tty=False, color=False)
    out = show(r, p.QueuedMessage(ahead=1), p.Content("Looking"))
    out += r.pause()  # the steering line opens below
    out += show(r, p.MessageTaken(), p.Content("In UTC."))
    out += r.note("queued: the model reads it after its current step")
    assert out == (
        "[queued behind 1 message in the session: it runs when they are done]\n"
        "Looking\n"
        "[the model takes the queued message into this turn]\n"
        "In UTC.\n"
        "[queued: the model reads it after its current step]\n"
    )


def test_a_cache_loss_says_why_quietly_unless_it_is_a_bug() -> None:
    r = Renderer(tty=True, color=True)
    restart = p.CacheLoss(105, 0, p.LossCause.SERVER_RESTARTED,
                          "the server restarted: /props media_marker changed")  # fmt: skip
    assert r.event(restart) == (
        f"{DIM}[cache: the server restarted: /props media_marker changed, so the server reused "
        f"0 of 105 prompt tokens]{RESET}\n"
    )
    bug = p.CacheLoss(105, 3, p.LossCause.PREFIX_CHANGED, "message 2 differs at byte 9")
    assert r.event(bug) == (
        "[cache lost, a bug in loopd: message 2 differs at byte 9; "
        "the server reused 3 of 105 prompt tokens]\n"
    )
    taken = p.CacheLoss(105, 3, p.LossCause.SLOT_TAKEN, "session b used the slot since")
    assert "session b used the slot since; the server reused 3" in r.event(taken)
    evicted = p.CacheLoss(105, 3, p.LossCause.EVICTED, "")
    assert "its prompt cache let this session go" in r.event(evicted)


def test_an_expected_miss_is_said_once_before_the_answer() -> None:
    r = Renderer(tty=False, color=False)
    told = "the server restarted: /props media_marker changed"
    out = show(r, p.CacheCold(p.LossCause.SERVER_RESTARTED, told), p.Content("Hello."))
    out += r.event(p.CacheLoss(105, 0, p.LossCause.SERVER_RESTARTED, told))
    out += r.end()
    assert out == f"[cache: {told}, so it processes the whole prompt again]\nHello.\n"
    # The next turn's loss was not said before: it is said after, as always.
    assert "reused 0 of 105" in r.event(p.CacheLoss(105, 0, p.LossCause.SERVER_RESTARTED, told))
