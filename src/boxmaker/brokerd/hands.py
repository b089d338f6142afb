"""`shell` and `run_cell` as brokerd runs them (SPEC section 15): in the machine's sandbox, at
most `[sandbox] concurrency` at once (a `trio.CapacityLimiter` shared by both tools; the rest
wait their turn), each within its time.

A `shell` run's output is bound as `sh.last` in the session's interpreter, if one runs
(`Kernels.bind_shell`: queued for its next cell, never waited for).

Fail closed: where the machine gives no sandbox (`Sandbox.working` false), both tools are
denied with the reason, unless the policy sets `[sandbox] unconfined`; then every call asks the
owner, whatever its grant or the session's answers, and runs under the limits alone.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import attrs
import trio
from attrs import frozen

from ..config import Config
from ..proto import DataClass, FailedResponse, ResultResponse, SessionId, ToolResponse
from .sandbox.bwrap import Sandbox
from .sandbox.digest import budget_of
from .sandbox.gate import busy, slot
from .sandbox.kernel import Kernels
from .sandbox.shell import run_shell

__all__ = ["Hands"]


@frozen
class Hands:
    """The sandbox, the sessions' interpreters (`kernels.run` must be running in brokerd's
    nursery), how long a command may take, and how long loopd waits for a call (a run that
    cannot start in time leaves it room: it is not run, and says so): `[tools]`'s
    `shell_timeout_s`, `shell_max_timeout_s` and `call_timeout_s`, whose defaults are the
    config's (`Hands.of`)."""

    sandbox: Sandbox
    kernels: Kernels
    shell_timeout: float
    shell_max_timeout: float
    call_timeout: float

    @classmethod
    def of(cls, sandbox: Sandbox, config: Config) -> Hands:
        tools = config.tools
        limiter = trio.CapacityLimiter(sandbox.limits.concurrency)
        wait = _slot_wait(tools.call_timeout_s, tools.cell_timeout_s)
        kernels = Kernels(
            sandbox,
            limiter,
            idle=tools.kernel_idle_s,
            timeout=tools.cell_timeout_s,
            slot_wait=wait,
            digest_bytes=budget_of(config.sandbox.digest_value_tokens),
        )
        return cls(
            sandbox, kernels, tools.shell_timeout_s, tools.shell_max_timeout_s, tools.call_timeout_s
        )

    async def run(
        self,
        tool: str,
        arguments: dict[str, Any],
        session: SessionId,
        data_class: DataClass,
        identity: str = "",
    ) -> ToolResponse:
        key = "code" if tool == "run_cell" else "command"
        text = str(arguments[key])  # its JSON was read strictly: no lone surrogate is left
        if "\0" in text:
            return FailedResponse(f"not run: the {key} holds a NUL, which no process takes")
        try:
            answer = await self._run(tool, text, arguments, session, data_class, identity)
        finally:
            with trio.CancelScope(shield=True):  # however it ended, nothing set-uid stays
                swept = await self.sandbox.sweep()
        if swept and isinstance(answer, ResultResponse):
            answer = attrs.evolve(answer, content=f"{answer.content}\n{swept.rstrip()}")
        return answer

    async def _run(
        self,
        tool: str,
        text: str,
        arguments: dict[str, Any],
        session: SessionId,
        data_class: DataClass,
        identity: str,
    ) -> ToolResponse:
        confined = self.sandbox.working
        if tool == "run_cell":
            return await self.kernels.cell(
                session, text, data_class, confined=confined, identity=identity
            )
        asked = arguments.get("timeout_s", self.shell_timeout)
        timeout = float(min(asked, self.shell_max_timeout))  # an int of any size compares
        wait = _slot_wait(self.call_timeout, timeout)
        async with slot(self.kernels.limiter, wait) as got:
            if not got:
                return busy(self.kernels.limiter, wait)
            bind = partial(
                self.kernels.bind_shell, session, data_class=data_class, identity=identity
            )
            return await run_shell(
                self.sandbox, text, timeout, data_class, confined=confined, ran=bind
            )


def _slot_wait(call_timeout: float, run_timeout: float) -> float:
    """How long a call may wait for its turn: what loopd's wait leaves after the run's time
    and a margin for the rest (at least 1 s: the config keeps 10 s between them)."""
    return max(1.0, call_timeout - run_timeout - 5.0)
