"""Attacks on the gateway's own modules, kept as tests (a hostile review of issue 44): the
model's answer and a question's words hide nothing; a reply to a question read before the
gateway posted its questions again is still an answer; an invitation's forged state is not
believed; and what held (no script, link or image past the sanitizer; strangers told)."""

from __future__ import annotations

import re
from pathlib import Path

import trio

from boxmaker.gatewayd.answers import fitted_html, split_answer
from boxmaker.gatewayd.markdown import to_html
from boxmaker.gatewayd.matrix.sync import batch_of
from boxmaker.gatewayd.port import Invited, Said
from boxmaker.gatewayd.showing import Showing
from boxmaker.gatewayd.speakers import AnswerQuestion, Decline, decide
from boxmaker.gatewayd.state import Asked, State
from boxmaker.gatewayd.words import visible
from boxmaker.proto import Answer

OWNER, ME, ROOM = "@o:hs", "@bot:hs", "!r:hs"


class Network:
    """Every post and edit noted."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str | None]] = []

    async def post(self, room: str, text: str, *, key: str, html: str | None = None,
                   reply_to: str | None = None, notice: bool = False) -> str:  # fmt: skip
        self.sent.append((text, html))
        return f"$p{len(self.sent)}"

    async def edit(self, room: str, target: str, text: str, *, key: str, html: str | None) -> None:
        self.sent.append((text, html))

    async def typing(self, room: str, on: bool) -> None:
        pass


async def test_the_model_s_answer_is_posted_with_nothing_hidden() -> None:
    """docs/security.md: what the gateway posts from the model is escaped (control characters,
    bidi marks): a bidi override could make an answer pass for a question."""
    network = Network()
    showing = Showing(network, ROOM, "k", "$asked", 0.01)  # type: ignore[arg-type]
    showing.end("Run `ls \u202eftp.exe\u202c` to list.\x1b[2J\x07 **ok**")

    async def then() -> None:
        pass

    with trio.fail_after(5):
        await showing.run(then)
    posted = "".join(f"{text}{html}" for text, html in network.sent)
    assert "\u202e" not in posted
    assert "\x1b" not in posted
    assert "\\u202e" in posted  # shown, escaped


def test_visible_escapes_invisible_and_line_breaking_characters() -> None:
    """A question's tool, summary and detail go through visible(): zero-width characters,
    soft hyphens, tag characters, the BOM, U+2028/2029 (a line break in most clients) and
    blank letters are escaped."""
    hidden = "rm\u200b -rf\u00ad ~\ufeff\u2060\U000e0041\u2028next line\u2029\u3164"
    shown = visible(hidden)
    assert shown.isascii(), repr(shown)


def test_a_question_is_kept_so_a_reply_read_first_after_a_restart_answers_it(
    tmp_path: Path,
) -> None:
    """After a restart the first /sync may bring the owner's reply before the watch has posted
    the questions again: the questions are in the state file, so the reply is an answer."""
    state = State(tmp_path)
    state.load()
    state.questions["$question"] = Asked("a-1", ROOM)
    state.save()
    again = State(tmp_path)
    again.load()
    reply = Said(ROOM, OWNER, "$r", "s", reply_to="$question")
    act = decide(reply, frozenset({OWNER}), ME, questions=frozenset(again.questions),
                 shared_rooms=False, max_bytes=16384, max_file_bytes=1000)  # fmt: skip
    assert act == AnswerQuestion(ROOM, "$r", "$question", Answer.SESSION)


def test_an_invitation_s_forged_state_naming_an_owner_is_not_believed() -> None:
    """Stripped state is unsigned (a remote server writes it): an extra `m.room.member` for
    the bot with the owner as sender, beside the real invitation from a stranger, is not
    taken: the invitation is the last member event for the bot."""
    body = {
        "next_batch": "s2",
        "rooms": {"invite": {"!evil:other": {"invite_state": {"events": [
            {"type": "m.room.member", "state_key": ME, "sender": OWNER,
             "content": {"membership": "invite"}},
            {"type": "m.room.member", "state_key": ME, "sender": "@evil:other",
             "content": {"membership": "invite"}, "event_id": "$i"},
        ]}}}},
    }  # fmt: skip
    batch = batch_of(body, ME)
    assert batch is not None
    acts = [
        decide(h, frozenset({OWNER}), ME, questions=frozenset(), shared_rooms=False,
               max_bytes=16384, max_file_bytes=1000)
        for h in batch.heard
    ]  # fmt: skip
    assert acts == [Decline("!evil:other", "@evil:other")]
    assert all(isinstance(h, Invited) for h in batch.heard)


# --- what held -------------------------------------------------------------------------------


def test_held_no_script_link_or_image_in_the_html() -> None:
    payloads = [
        "[x](javascript:alert(1))", "<javascript:alert(1)>", "[y](data:text/html,hi)",
        "![i](https://e.example/x.png)", "<img src=x onerror=alert(1)>",
        "[z](JAVASCRIPT&#58;alert(1))", "[w](//evil.example)", "`<b>`", "<script>x</script>",
        "[r]\n\n[r]: javascript:alert(1)", "```js\" onmouseover=\"x\n1\n```",
        '<a href="https://x" onclick="y">a</a>', "[t](vbscript:x)", "[u](file:///etc/passwd)",
    ]  # fmt: skip
    for text in payloads:
        html = to_html(text + " **b**") or ""
        low = html.lower()
        for bad in ("<img", "<script"):
            assert bad not in low, (text, html)
        for tag in re.findall(r"<[a-z][^>]*>", low):  # only href/start/class attributes
            assert re.fullmatch(r'<[a-z0-9]+(?: (?:href|start|class)="[^"]*")?>', tag), tag
        for href in re.findall(r'href="([^"]*)"', low):
            assert href.startswith(("https://", "http://", "mailto:")), (text, html)


def test_held_splitting_and_rendering_hostile_text() -> None:
    texts = ["a" * 1_000_000, "\x01" * 200_000, "[a(" * 20_000, "*a_" * 20_000,
             "> - " * 20_000, "| " * 50_000 + "\n|-|\n" + "| x |\n" * 10_000]  # fmt: skip
    for text in texts:
        parts = split_answer(text)
        for part in parts[:5]:
            fitted_html(part)
        assert "".join(parts) == text


def test_held_a_stranger_s_anything_is_told_or_ignored() -> None:
    for body in ({"next_batch": "x", "rooms": {"join": {ROOM: {"timeline": {"events": [
        {"type": "m.room.message", "sender": "@s:hs", "event_id": "$1",
         "content": {"msgtype": "m.text", "body": "y", "m.relates_to": {
             "m.in_reply_to": {"event_id": "$q"}}}},
        {"type": "m.reaction", "sender": "@s:hs", "event_id": "$2",
         "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$q",
                                      "key": "👍"}}},
        {"type": "m.room.message", "sender": "@s:hs", "event_id": "$3",
         "content": {"msgtype": "m.text", "body": "!stop"}},
    ]}}}}},):  # fmt: skip
        batch = batch_of(body, ME)
        assert batch is not None
        for heard in batch.heard:
            act = decide(heard, frozenset({OWNER}), ME, questions=frozenset({"$q"}),
                         shared_rooms=True, max_bytes=16384, max_file_bytes=1000)  # fmt: skip
            assert type(act).__name__ == "TellStranger", act
