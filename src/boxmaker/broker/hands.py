"""`shell` and `run_cell` as brokerd runs them (SPEC section 15): in the machine's sandbox, at
most `[sandbox] concurrency` at once (a `trio.CapacityLimiter` shared by both tools; the rest
wait their turn), each within its time.

Fail closed: where the machine gives no sandbox (`Sandbox.working` false), both tools are
denied with the reason, unless the policy sets `[sandbox] unconfined`; then every call asks the
owner, whatever its grant or the session's answers, and runs under the limits alone.
"""

from __future__ import annotations

from typing import Any

import trio
from attrs import frozen

from ..config import Config
from ..proto import DataClass, SessionId, ToolResponse
from ..tools import SANDBOXED_TOOLS
from .kernel import Kernels
from .policy import Decision, Policy, Verdict
from .sandbox import Sandbox, SandboxLimits
from .shell import run_shell

__all__ = ["SANDBOXED", "Hands", "confine", "limits_of"]

SANDBOXED = frozenset(tool.name for tool in SANDBOXED_TOOLS)


def limits_of(config: Config) -> SandboxLimits:
    """The `[sandbox]` keys as a run's limits."""
    mb, box = 1024**2, config.sandbox
    return SandboxLimits(cpu_s=box.cpu_s, memory_bytes=box.memory_mb * mb,
                         processes=box.processes, open_files=box.open_files,
                         file_bytes=box.file_mb * mb, tmp_bytes=box.tmp_mb * mb,
                         output_bytes=box.output_mb * mb, concurrency=box.concurrency)  # fmt: skip


@frozen
class Hands:
    """The sandbox, the sessions' interpreters (`kernels.run` must be running in brokerd's
    nursery) and how long a command may take."""

    sandbox: Sandbox
    kernels: Kernels
    shell_timeout: float = 30.0
    shell_max_timeout: float = 100.0

    @classmethod
    def of(cls, sandbox: Sandbox, config: Config) -> Hands:
        tools = config.tools
        limiter = trio.CapacityLimiter(sandbox.limits.concurrency)
        kernels = Kernels(sandbox, limiter, idle=tools.kernel_idle_s, timeout=tools.cell_timeout_s)
        return cls(sandbox, kernels, tools.shell_timeout_s, tools.shell_max_timeout_s)

    async def run(
        self, tool: str, arguments: dict[str, Any], session: SessionId, data_class: DataClass
    ) -> ToolResponse:
        confined = self.sandbox.working
        if tool == "run_cell":
            code = str(arguments["code"])
            return await self.kernels.cell(session, code, data_class, confined=confined)
        timeout = min(float(arguments.get("timeout_s", self.shell_timeout)), self.shell_max_timeout)
        async with self.kernels.limiter:
            command = str(arguments["command"])
            return await run_shell(self.sandbox, command, timeout, data_class, confined=confined)


def confine(sandbox: Sandbox | None, policy: Policy, verdict: Verdict) -> Verdict:
    """The verdict for a call of a sandboxed tool, given the policy's: unchanged where the
    sandbox works; else denied, or asked when the policy runs them unconfined (`sandbox` None:
    brokerd was started without hands)."""
    if verdict.decision is Decision.DENY or (sandbox is not None and sandbox.working):
        return verdict
    why = sandbox.reason if sandbox is not None else "brokerd was started without one"
    source = f"{policy.path.name} [sandbox]"
    if policy.unconfined:
        return Verdict(Decision.ASK, f"no sandbox here ({why}); the policy runs shell and "
                       "run_cell unconfined, so every call asks the owner", source)  # fmt: skip
    return Verdict(Decision.DENY, f"shell and run_cell run only in a sandbox, and there is none "
                   f"here: {why}. (The owner may set [sandbox] unconfined = true in "
                   f"{policy.path.name}: then every call asks.)", source)  # fmt: skip
