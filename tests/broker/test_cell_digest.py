"""A cell's digest in the real sandbox, through brokerd (SPEC section 22): its outputs numbered
and its last value; a long value kept in the interpreter as a stub that a later cell reads
back with `values.get`, gone when the interpreter is; an exception's digest marked `is_error`
up to loopd's side of `broker.sock`; `shell`'s output as `sh.last` in its session's
interpreter alone, bounded; and a cell's result of the highest class its interpreter holds."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from boxmaker import proto as p
from boxmaker.brokerd import SHIPPED_POLICY, Broker, BrokerServer
from boxmaker.brokerd.hands import Hands
from boxmaker.brokerd.sandbox.digest import MOST_SH_LAST
from boxmaker.brokerd.sandbox.kernel import NEW_INTERPRETER, Kernels
from boxmaker.proto import DataClass
from boxmaker.serving.broker_port import BrokerPort
from boxmaker.serving.listener import open_unix_listener

from ..helpers import new_hands, real_sandbox
from .test_service import S1, S2, call, content, new_broker

pytestmark = pytest.mark.walls

S3 = p.SessionId("s3")
STUB = re.compile(r'values\.get\("(\d+@[0-9a-f]{6})", (\d+|"last")\)')


def hands(base: Path, **kernels: int) -> Hands:
    sandbox = real_sandbox(base / "ws")
    limiter = trio.CapacityLimiter(4)
    return new_hands(sandbox, Kernels(sandbox, limiter, idle=600, timeout=10, **kernels))


@contextlib.asynccontextmanager
async def running(base: Path, **kernels: int) -> AsyncIterator[Broker]:
    """A brokerd of the shipped policy with its interpreters held."""
    broker = new_broker(base, SHIPPED_POLICY, hands=hands(base, **kernels))
    assert broker.hands is not None
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.hands.kernels.run)
            yield broker
            nursery.cancel_scope.cancel()


async def cell(broker: Broker, code: str, session: p.SessionId = S1) -> p.ResultResponse:
    result = await call(broker, "run_cell", session, code=code)
    assert isinstance(result, p.ResultResponse), result
    assert result.untrusted
    return result


async def test_each_statements_output_is_numbered_then_the_last_value(base: Path) -> None:
    code = (
        "import os, subprocess, sys\n"
        "print('one')\n"
        "print('two'); print('three', file=sys.stderr)\n"
        "for n in range(3):\n"
        "    print(n)\n"
        "x = 5\n"
        "os.system('echo from a child; echo its error >&2')\n"
        "subprocess.run(['echo', 'waited for'])\n"
        "x * 2"
    )
    async with running(base) as broker:
        said = await cell(broker, code)
        assert said.content == NEW_INTERPRETER + (
            "[1] one\n[2] two\n[3] three\n[4] 0\n1\n2\n[5] from a child\nits error\n"
            "[6] waited for\nLast value: 10"
        )
        assert (said.is_error, said.data_class) == (False, DataClass.PRIVATE)
        assert content(await call(broker, "run_cell", code="y = 1")) == "(no output)"
        assert content(await call(broker, "run_cell", code="print('a', end='')")) == "[1] a"


async def test_a_long_value_is_a_stub_a_later_cell_reads_back_until_a_restart(base: Path) -> None:
    async with running(base, digest_bytes=200) as broker:
        said = (await cell(broker, "print('x' * 1000)\nprint('short')\n'y' * 500")).content
        assert "[2] short\n" in said
        (output, one), (value, last) = STUB.findall(said)
        assert (output, one, value, last) == (output, "1", output, '"last"')
        assert said.count("values.get(") == 2  # the short one is shown whole
        assert "[1] (1,001 bytes, over the digest's 200: kept; " in said
        assert "Last value: (a str; 502 bytes, over the digest's 200: kept; " in said
        again = f'a = values.get("{output}", 1)\nb = values.get("{output}", "last")\n'
        again += "a == 'x' * 1000 + '\\n', b == repr('y' * 500)"
        assert (await cell(broker, again)).content == "Last value: (True, True)"
        hidden = await cell(broker, "values = [1, 2]\nvalues")  # a cell's own name hides it
        assert hidden.content == "Last value: [1, 2]"
        later = await cell(broker, f'del values\nlen(values.get("{output}", 1))')  # kept still
        assert later.content == "Last value: 1001"
        huge = await cell(broker, "raise ValueError('e' * 100_000)")
        assert huge.is_error
        assert len(huge.content) < 21_000  # an error's traceback is bounded too
        assert "\n[... 80,1" in huge.content, huge.content[9_900:10_100]
        ended = await cell(broker, "print('z' * 300)\nimport os\nos._exit(0)")
        assert "the interpreter ended: the interpreter was stopped" in ended.content
        assert ended.content.startswith("[1] " + "z" * 300 + "\n[")  # nothing to keep it in
        assert "values.get" not in ended.content
        gone = await cell(broker, f'values.get("{output}", 1)')
        assert gone.is_error
        assert gone.content.startswith(NEW_INTERPRETER + "Error:\nTraceback")
        assert gone.content.endswith(
            f"NoValue: values.get('{output}', 1): gone: the interpreter that kept it has ended "
            "(this session's interpreter was restarted since, and nothing earlier cells kept "
            "or defined is in this one); run what made it again"
        )
        assert '"<string>"' not in gone.content  # none of the kernel's own frames


async def test_values_hold_at_most_their_bound_the_oldest_dropped(base: Path) -> None:
    async with running(base, digest_bytes=200, values=1500) as broker:
        names = []
        for n in range(3):
            said = (await cell(broker, f"print('{n}' * 600)")).content
            names += [name for name, _index in STUB.findall(said)]
        # Each cell's values reach the interpreter with the next cell: the fourth brings the
        # third's, past 1,500 characters, and the first's is dropped.
        first, second, third = names
        dropped = await cell(broker, f'values.get("{first}", 1)')
        assert dropped.is_error
        assert "dropped: values holds at most 1,500 characters" in dropped.content
        kept = await cell(broker, f'values.get("{second}", 1)[:3], values.get("{third}", 1)[:3]')
        assert kept.content == "Last value: ('111', '222')"


async def test_an_error_digest_is_marked_is_error_through_broker_sock(base: Path) -> None:
    broker = new_broker(base, SHIPPED_POLICY, hands=hands(base))
    assert broker.hands is not None
    path = base / "run" / "broker.sock"
    server = BrokerServer(broker)
    port = BrokerPort(path, call_timeout=30.0)

    async def run(code: str) -> p.ResultResponse:
        request = p.ToolRequest(S1, 1, "run_cell", json.dumps({"code": code}), None)
        answer = await port.call(request)
        assert isinstance(answer, p.ResultResponse), answer
        return answer

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(broker.hands.kernels.run)
            await nursery.start(server.serve, await open_unix_listener(path, "brokerd"))
            raised = await run("def f():\n    return 1 / 0\nprint(1)\nf()")
            assert raised.is_error
            assert raised.content == NEW_INTERPRETER + (
                "[1] 1\nError:\nTraceback (most recent call last):\n"
                '  File "<cell 1>", line 4, in <module>\n    f()\n'
                '  File "<cell 1>", line 2, in f\n    return 1 / 0\n           ~~^~~\n'
                "ZeroDivisionError: division by zero"
            )
            syntax = await run("1 +")
            assert syntax.is_error
            assert syntax.content == (
                'Error:\n  File "<cell 2>", line 1\n    1 +\n       ^\nSyntaxError: invalid syntax'
            )
            fine = await run("6 * 7")
            assert (fine.is_error, fine.content) == (False, "Last value: 42")
            ended = await run("import os\nos._exit(0)")  # its state lost: an error too
            assert ended.is_error
            server.stop(grace=0)
            nursery.cancel_scope.cancel()


async def test_shell_output_is_sh_last_in_its_sessions_interpreter_alone(base: Path) -> None:
    async with running(base) as broker:
        assert broker.hands is not None
        kernels = broker.hands.kernels
        none = (await cell(broker, "sh.last is None")).content  # started: nothing bound yet
        assert none == NEW_INTERPRETER + "Last value: True"
        await cell(broker, "1", S2)  # another session's interpreter, running
        ran = await call(broker, "shell", command="echo out; echo err >&2; exit 3")
        assert content(ran).startswith("out\nerr\n[exit 3 · ")
        bound = await cell(broker, "sh.last")
        assert bound.content == "Last value: {'stdout': 'out\\nerr\\n', 'stderr': '', 'exit': 3}"
        assert (await cell(broker, "sh.last is None", S2)).content == "Last value: True"
        await call(broker, "shell", S3, command="echo none runs")  # no interpreter: none starts
        assert S3 not in kernels._kernels
        said = (await cell(broker, "sh.last is None", S3)).content
        assert said == NEW_INTERPRETER + "Last value: True"
        # A session that took a removed one's id is another: its shell is not the old one's.
        await call(broker, "shell", identity="born-again", command="echo not yours")
        assert (await cell(broker, "sh.last['stdout']")).content == "Last value: 'out\\nerr\\n'"
        many = MOST_SH_LAST + 10_000
        await call(broker, "shell", command=f"head -c {many} /dev/zero | tr '\\0' x")
        long = await cell(broker, "s = sh.last['stdout']\nlen(s), s.count('x'), s[-3:]")
        size, xs, end = eval(long.content.removeprefix("Last value: "))
        assert MOST_SH_LAST <= size < MOST_SH_LAST + 100  # its start and its end, bounded
        assert (xs, end) == (MOST_SH_LAST, "xxx")


async def test_a_cells_result_is_of_the_highest_class_its_interpreter_holds(base: Path) -> None:
    arms = hands(base)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(arms.kernels.run)

            async def run(tool: str, key: str, text: str, session: p.SessionId, of: DataClass
                          ) -> p.ResultResponse:  # fmt: skip
                answer = await arms.run(tool, {key: text}, session, of)
                assert isinstance(answer, p.ResultResponse), answer
                assert answer.untrusted
                return answer

            assert (await run("run_cell", "code", "1", S1, DataClass.PRIVATE)).data_class == (
                DataClass.PRIVATE
            )
            # A secret shell output bound in S1's interpreter: every later cell may print it.
            await run("shell", "command", "echo the secret", S1, DataClass.SECRET)
            said = await run("run_cell", "code", "sh.last['stdout']", S1, DataClass.PRIVATE)
            assert said.content == "Last value: 'the secret\\n'"
            assert said.data_class is DataClass.SECRET
            later = await run("run_cell", "code", "2", S1, DataClass.PUBLIC)
            assert later.data_class is DataClass.SECRET  # a high-water mark: it never falls
            # A cell that read a secret keeps it in its variables: the same holds.
            await run("run_cell", "code", "kept = 'secret'", S2, DataClass.SECRET)
            said = await run("run_cell", "code", "kept", S2, DataClass.PRIVATE)
            assert said.data_class is DataClass.SECRET
            # Another session's interpreter, and a new interpreter, hold nothing of it.
            assert (await run("run_cell", "code", "3", S3, DataClass.PRIVATE)).data_class == (
                DataClass.PRIVATE
            )
            await run("run_cell", "code", "import os\nos._exit(0)", S2, DataClass.PRIVATE)
            fresh = await run("run_cell", "code", "4", S2, DataClass.PRIVATE)
            assert fresh.content.startswith(NEW_INTERPRETER)
            assert fresh.data_class is DataClass.PRIVATE
            nursery.cancel_scope.cancel()
