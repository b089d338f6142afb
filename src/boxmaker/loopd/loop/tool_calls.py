"""A turn's tool calls, whichever way they travel: as the server's `tool_calls` (native) or as
tool blocks in the answer's text (fenced, `tools/fenced.py`). Pure.

The turn loop asks three things, and the session's baseline (never the current profile) gives
the answer, so a session keeps the way it was created with: which calls a completion made
(`completion_calls`), who answers one (`decide`: a block that cannot run is answered with
its problem, the rest go through the same `dispatch`), and what of a streamed completion the
channel is shown (`Shown`: a tool block's text is not answer text; tool calls are announced
by the turn itself, as for native calls).
"""

from __future__ import annotations

from ...proto import (
    Baseline,
    ChatEvent,
    Completion,
    Content,
    ResultResponse,
    Retrying,
    ToolCall,
    ToolCallDelta,
    TurnEvent,
)
from ...tools import (
    BlockCall,
    FenceFilter,
    PhraseFilter,
    Port,
    ReadBack,
    dispatch,
    failed,
    parse_blocks,
)
from .words import loopd_words

__all__ = ["Shown", "completion_calls", "decide"]


def completion_calls(baseline: Baseline, completion: Completion) -> tuple[ToolCall, ...]:
    """The calls a completion made: its tool calls, or in a fenced session its tool blocks."""
    if baseline.fenced is None:
        return completion.tool_calls or ()
    return tuple(parse_blocks(completion.content, [tool.name for tool in baseline.tools]))


def decide(baseline: Baseline, call: ToolCall) -> ResultResponse | Port | ReadBack:
    """Who answers `call`: its problem when it is a tool block that cannot run, else
    `dispatch` over the session's own tools."""
    if isinstance(call, BlockCall) and call.problem is not None:
        return failed(call.problem)
    return dispatch(baseline.tools, call.name, call.arguments)


class Shown:
    """The events of a completion's stream that reach the channel: tool-call fragments are
    dropped (the turn announces each call as it runs it) and, in a fenced session, the text
    of tool blocks, and of loopd's own words to the model, is taken out of the answer's
    text."""

    def __init__(self, baseline: Baseline) -> None:
        fenced = baseline.fenced is not None
        self._filters = (FenceFilter(), PhraseFilter(loopd_words(baseline))) if fenced else None

    def __call__(self, event: ChatEvent) -> list[TurnEvent]:
        if isinstance(event, ToolCallDelta):
            return []
        if self._filters is not None:
            blocks, words = self._filters
            if isinstance(event, Retrying):
                blocks.reset()  # the channel drops what it showed of that attempt
                words.reset()
            elif isinstance(event, Content):
                text = words.feed(blocks.feed(event.text))
                return [Content(text=text)] if text else []
        return [event]

    def flush(self) -> list[TurnEvent]:
        """What the filters held back when the completion ended (never a block's text, nor
        loopd's words)."""
        if self._filters is None:
            return []
        blocks, words = self._filters
        text = words.feed(blocks.flush()) + words.flush()
        return [Content(text=text)] if text else []
