"""The live status line of a turn on a terminal, while the model has shown nothing yet. Pure.

    ⠹ prompt 1024 of 4096 tokens (512 from the cache) · 12.3 s

It lives from the moment a request goes out (the turn is sent, a tool answered, a retry
starts) until the first text or tool call; bxctl redraws it on a timer, so the spinner and
the seconds move between the server's progress events, which come once per batch of tokens.
It is shown only once the wait has lasted `SHOW_AFTER_S`, so a quick answer never flashes.
"""

from __future__ import annotations

__all__ = ["SHOW_AFTER_S", "StatusLine"]

SHOW_AFTER_S = 0.3
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
ASCII_SPINNER = "|/-\\"


class StatusLine:
    """The state of one wait: since when, and the prompt's progress so far."""

    def __init__(self, *, unicode: bool = True) -> None:
        self._frames = SPINNER if unicode else ASCII_SPINNER
        self._dot = "·" if unicode else "-"
        self._since: float | None = None
        self._progress: tuple[int, int, int] | None = None  # total, cache, processed

    @property
    def waiting(self) -> bool:
        return self._since is not None

    def start(self, now: float) -> None:
        """A request went out at `now`; nothing of its answer is shown yet."""
        self._since = now
        self._progress = None

    def progress(self, total: int, cache: int, processed: int) -> None:
        self._progress = (total, cache, processed)

    def stop(self) -> None:
        """The answer began (or the turn ended): no more line."""
        self._since = None
        self._progress = None

    def text(self, now: float, width: int) -> str | None:
        """The line to draw at `now`, at most `width - 1` characters; None when there is none
        to draw (not waiting, or not for long enough yet)."""
        if self._since is None or now - self._since < SHOW_AFTER_S:
            return None
        elapsed = now - self._since
        spinner = self._frames[int(elapsed * 10) % len(self._frames)]
        if self._progress is None:
            what = "processing the prompt"
        else:
            total, cache, processed = self._progress
            if processed < total:
                what = f"prompt {processed} of {total} tokens ({cache} from the cache)"
            else:
                what = f"prompt of {total} tokens done ({cache} from the cache); generating"
        line = f"{spinner} {what} {self._dot} {_seconds(elapsed)}"
        return line[: max(width - 1, 1)]


def _seconds(elapsed: float) -> str:
    if elapsed < 60:
        return f"{elapsed:.1f} s"
    minutes, seconds = divmod(int(elapsed), 60)
    return f"{minutes} min {seconds:02d} s"
