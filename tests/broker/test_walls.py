"""The sandbox's walls, tried as a hostile model would (issue 40): whoever runs brokerd, nothing
it starts is host root or holds a capability, the kernel's settings and the host's devices are
out of reach, the workspace is reached without opening any folder wider, a root inside it is
kept to its rules (masked, read-only, pinned where it is), nothing a cell started runs after
its result, no set-uid bit survives, and the sandbox says little of the host.

Each test makes the attack; each was seen to fail with its defence removed. They run as root
(CI) and, through `test_as_an_ordinary_user.py`, as an ordinary user.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path, PurePosixPath

import attrs
import pytest
import trio

from boxmaker.brokerd import Broker, builtin_registry
from boxmaker.brokerd.files.roots import Root
from boxmaker.brokerd.policy.rules import parse_policy
from boxmaker.brokerd.sandbox import kernel as kernel_module
from boxmaker.brokerd.sandbox.bwrap import Sandbox
from boxmaker.brokerd.sandbox.kernel import NEW_INTERPRETER, Kernels
from boxmaker.brokerd.sandbox.process_tree import state_of, tree_of, who
from boxmaker.brokerd.sandbox.shell import run_shell
from boxmaker.clock import TickingClock
from boxmaker.proto import DataClass, FailedResponse, ResultResponse, SessionId, ToolRequest

from ..helpers import given_over, new_hands, real_sandbox

pytestmark = pytest.mark.walls

S1 = SessionId("s1")
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")
HOSTS = Path("/etc/hosts")
STANDARD_NODES = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                  "/dev/tty", "/dev/ptmx", "/dev/pts/ptmx"}  # fmt: skip


async def shell(sandbox: Sandbox, command: str) -> str:
    with trio.fail_after(60):
        result = await run_shell(sandbox, command, 20, DataClass.PRIVATE)
    assert isinstance(result, ResultResponse), result
    return result.content


def expected_uid(sandbox: Sandbox) -> int:
    return sandbox.user[0] if sandbox.user is not None else os.getuid()


@pytest.mark.parametrize("confined", [True, False], ids=["in bwrap", "unconfined"])
async def test_nothing_the_sandbox_runs_is_host_root_or_holds_a_capability(
    sandbox: Sandbox, confined: bool
) -> None:
    command = ["/bin/sh", "-c", "echo started; exec cat"]
    with trio.fail_after(30):
        async with sandbox.running(command, stdin_pipe=True, confined=confined) as run:
            assert run.process.stdout is not None
            assert await run.process.stdout.receive_some() == b"started\n"  # it runs now
            chain = tree_of(run.process.pid).path(2 if confined else 0)
            seen = who(chain[-1])
    assert set(seen.uids) == {expected_uid(sandbox)}, seen
    assert 0 not in seen.uids
    assert not seen.capable, seen
    if confined or sandbox.user is not None:  # an ordinary user cannot empty its bounding set
        assert seen.capabilities["CapBnd"] == 0, seen


async def test_the_kernels_settings_and_the_hosts_devices_are_out_of_reach(
    sandbox: Sandbox,
) -> None:
    before = host_state()
    try:
        out = await _try_the_host(sandbox)
    finally:  # were the wall down, the host is put back as it was (and the test fails)
        after = put_back(before)
    assert after == before
    wrote, _, rest = out.partition("SETTINGS\n")
    settings, _, nodes = rest.partition("NODES\n")
    assert "WROTE" not in wrote, out
    assert settings == "", out  # no kernel setting is writable, even its own namespaces'
    assert set(nodes.rpartition("\n[")[0].split()) <= STANDARD_NODES, nodes


def host_state() -> tuple[str, int, int]:
    """The host's core pattern, and /dev/null's mode and owner."""
    null = os.stat("/dev/null")
    return CORE_PATTERN.read_text(), null.st_mode, null.st_uid


def put_back(before: tuple[str, int, int]) -> tuple[str, int, int]:
    """The host's state as a run left it, after putting it back as it was `before`."""
    after = host_state()
    if after[1] != before[1]:
        os.chmod("/dev/null", stat.S_IMODE(before[1]))
    if after[0] != before[0]:
        CORE_PATTERN.write_text(before[0])
    return after


async def _try_the_host(sandbox: Sandbox) -> str:
    return await shell(
        sandbox,
        "{ echo '|/bin/sh -c id' > /proc/sys/kernel/core_pattern && echo WROTE; } 2>/dev/null; "
        "{ echo 1 > /proc/sys/vm/drop_caches && echo WROTE; } 2>/dev/null; "
        "chmod 600 /dev/null 2>/dev/null && echo WROTE; chown 1000 /dev/null 2>/dev/null && "
        "echo WROTE; echo SETTINGS; find /proc/sys -writable -type f 2>/dev/null | head -5; "
        "echo NODES; find /dev -writable ! -type d ! -type l 2>/dev/null | sort",
    )


async def test_the_workspace_is_reached_without_opening_any_folder_above_it(
    tmp_path: Path,
) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    modes = {folder: folder.stat().st_mode for folder in (tmp_path, private)}
    sandbox = real_sandbox(private / "workspace")
    out = await shell(sandbox, "echo written > here.txt; cat here.txt; id -u")
    assert out.startswith("written\n1000\n[exit 0"), out
    assert (private / "workspace" / "here.txt").read_text() == "written\n"
    assert {folder: folder.stat().st_mode for folder in modes} == modes


async def test_the_sandbox_has_its_own_names_and_says_little_of_the_host(
    sandbox: Sandbox,
) -> None:
    out = await shell(sandbox, "hostname; id -un; getent hosts localhost; cat /etc/passwd")
    assert out.splitlines()[:2] == ["box", "user"]
    for line in out.splitlines()[3:]:  # the passwd file is the sandbox's own, not the host's
        assert line.split(":")[0] in ("root", "user") or line.startswith("[exit"), line
    assert "localhost" in out
    assert not host_names() & set(out.split())  # nor are the names the host's file gives


def host_names() -> set[str]:
    """The names the host's /etc/hosts gives, but the usual ones for loopback."""
    lines = HOSTS.read_text().splitlines() if HOSTS.exists() else []
    named = {word for line in lines if not line.startswith("#") for word in line.split()[1:]}
    return named - {"localhost", "ip6-localhost", "ip6-loopback"}


def with_roots(sandbox: Sandbox, *roots: Root) -> Sandbox:
    """`sandbox` with `roots` granted beside its workspace (their identities taken now)."""
    taken = []
    for root in roots:
        st = os.stat(root.path)
        taken.append(attrs.evolve(root, identity=(st.st_dev, st.st_ino)))
    return attrs.evolve(sandbox, roots=(sandbox.workspace_root(), *taken))


def root(path: Path, *, read: bool = True, write: bool = False,
         data_class: DataClass = DataClass.PRIVATE) -> Root:  # fmt: skip
    return Root(path.name, PurePosixPath(path), read, write, data_class)


async def test_a_closed_root_in_the_workspace_is_masked_and_a_read_only_one_is_read_only(
    sandbox: Sandbox,
) -> None:
    ws = sandbox.workspace
    for name in ("vault", "deep/keys", "ro", "open"):
        (ws / name).mkdir(parents=True)
    (ws / "vault" / "key").write_text("KEY-VAULT")
    (ws / "deep" / "keys" / "key").write_text("KEY-DEEP")
    (ws / "ro" / "notes.txt").write_text("readable")
    sandbox = with_roots(
        given_over(sandbox),
        root(ws / "vault", read=False),
        root(ws / "deep" / "keys", data_class=DataClass.SECRET),
        root(ws / "ro"),
        root(ws / "open", write=True),
    )
    out = await shell(
        sandbox,
        "cat vault/key deep/keys/key; grep -r KEY . ; ls -A vault deep/keys; cat ro/notes.txt; "
        "echo x > ro/new; echo x > vault/new; echo x > open/new && echo open-ok",
    )
    assert "KEY" not in out.replace("grep -r KEY", ""), out
    assert "readable" in out
    assert out.count("Read-only file system") >= 2, out
    assert "open-ok" in out
    assert not (ws / "ro" / "new").exists()
    assert not (ws / "vault" / "new").exists()
    assert (ws / "open" / "new").read_text() == "x\n"


async def test_a_root_and_the_folders_above_it_cannot_be_moved_from_the_sandbox(
    sandbox: Sandbox,
) -> None:
    ws = sandbox.workspace
    (ws / "a" / "vault").mkdir(parents=True)
    (ws / "a" / "vault" / "key").write_text("KEY")
    sandbox = with_roots(given_over(sandbox), root(ws / "a" / "vault", read=False))
    out = await shell(sandbox, "mv a b; mv a/vault a/v2; rmdir a/vault; ls a")
    assert out.count("Device or resource busy") >= 2, out
    assert (ws / "a" / "vault" / "key").read_text() == "KEY"


async def test_a_run_is_refused_while_a_root_in_the_workspace_is_not_where_it_was(
    sandbox: Sandbox,
) -> None:
    ws = sandbox.workspace
    (ws / "vault").mkdir()
    (ws / "vault" / "key").write_text("KEY")
    sandbox = with_roots(given_over(sandbox), root(ws / "vault", read=False))
    (ws / "vault").rename(ws / "moved")  # as the owner (or a run before the pins) could
    (ws / "vault").mkdir()
    with trio.fail_after(60):
        answer = await run_shell(sandbox, "cat moved/key", 20, DataClass.PRIVATE)
    assert isinstance(answer, FailedResponse), answer
    assert "the root vault" in answer.message
    assert "no longer the folder it was" in answer.message


async def test_a_cell_that_leaves_a_thread_or_a_process_running_ends_its_interpreter(
    sandbox: Sandbox,
) -> None:
    kernels = Kernels(given_over(sandbox), trio.CapacityLimiter(2), idle=60, timeout=10)
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(kernels.run)

            async def cell(code: str) -> str:
                answer = await kernels.cell(S1, code, DataClass.PRIVATE)
                assert isinstance(answer, ResultResponse), answer
                return answer.content

            await cell("import threading, time, _thread, subprocess\nkept = 1")
            said = await cell("threading.Thread(target=time.sleep, args=(100,)).start()")
            assert "[the cell left 1 thread running after it ended" in said, said
            assert (await cell("kept = 1")).startswith(NEW_INTERPRETER)
            said = await cell("import _thread, time\n_thread.start_new_thread(time.sleep, (99,))")
            assert "left 1 thread running" in said, said
            said = await cell("import os\nos.system('sleep 100 &')")
            assert "left 1 process running" in said, said
            joined = "import threading\nt = threading.Thread(target=print, args=('in',))\n"
            joined += "t.start()\nt.join()\n'done'"
            said = await cell(joined)  # waited for: nothing is left
            # The thread prints "in" and its newline in two writes, on its own time: which
            # statement's output holds each is the threads' race, so the numbers are not said.
            assert "] in\n" in said, said
            assert said.endswith("\nLast value: 'done'"), said
            assert await cell("t.is_alive()") == "Last value: False"  # the same interpreter
            nursery.cancel_scope.cancel()


async def test_an_interpreter_runs_nothing_between_its_cells(sandbox: Sandbox) -> None:
    kernels = Kernels(given_over(sandbox), trio.CapacityLimiter(2), idle=60, timeout=10)
    ticks = sandbox.workspace / "ticks"
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(kernels.run)
            timer = (
                "import signal\n"
                "def tick(*_):\n"
                "    with open('ticks', 'a') as f: f.write('t')\n"
                "signal.signal(signal.SIGALRM, tick)\n"
                "signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)\n"
            )
            answer = await kernels.cell(S1, timer, DataClass.PRIVATE)
            assert isinstance(answer, ResultResponse), answer
            pid = kernels._kernels[S1].paused
            assert pid is not None
            assert state_of(pid) == "T"  # stopped: no thread, handler or timer of it runs
            before = ticks.read_text() if ticks.exists() else ""
            await trio.sleep(0.3)  # thirty ticks, were it running
            assert (ticks.read_text() if ticks.exists() else "") == before
            answer = await kernels.cell(S1, "1 + 1", DataClass.PRIVATE)
            assert isinstance(answer, ResultResponse)
            assert answer.content.endswith("2")
            nursery.cancel_scope.cancel()


async def test_an_idle_interpreter_that_uses_the_cpu_is_ended_and_its_next_cell_told(
    sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernel_module, "PAUSE_WHEN_IDLE", False)  # the watch alone, here
    kernels = Kernels(given_over(sandbox), trio.CapacityLimiter(2), idle=60, timeout=10,
                      watch=0.2)  # fmt: skip
    busy = (
        "import signal\n"
        "def spin(*_):\n"
        "    for _ in range(10**6): pass\n"
        "signal.signal(signal.SIGALRM, spin)\n"
        "signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)\n"
    )
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(kernels.run)
            answer = await kernels.cell(S1, busy, DataClass.PRIVATE)
            assert isinstance(answer, ResultResponse), answer
            await kernels._kernels[S1].stop.wait()  # ended by the watch
            answer = await kernels.cell(S1, "1", DataClass.PRIVATE)
            assert isinstance(answer, ResultResponse)
            assert answer.content.startswith(NEW_INTERPRETER + "(The last one was ended: it used")
            assert "while no cell ran" in answer.content
            nursery.cancel_scope.cancel()


def set_id_files(top: Path) -> list[str]:
    """Every file beneath `top` with a set-uid or set-gid bit (a folder's set-gid aside)."""
    found = []
    for folder, _dirs, files in os.walk(top):
        for name in files:
            st = os.lstat(Path(folder) / name)
            if not stat.S_ISLNK(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(str(Path(folder, name).relative_to(top)))
    return found


async def test_no_set_uid_bit_the_sandbox_sets_survives_its_call(sandbox: Sandbox) -> None:
    sandbox = given_over(sandbox)
    hands = new_hands(sandbox, Kernels(sandbox, trio.CapacityLimiter(2), idle=60, timeout=10))
    command = ("cp /bin/true t; chmod 6755 t; mkdir -p d/e; cp /bin/true d/e/u; chmod u+s d/e/u; "
               "cp /bin/true d/g; chmod g+s d/g; chmod g+s d; ln -s t link; ls -l t")  # fmt: skip
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(hands.kernels.run)
            answer = await hands.run("shell", {"command": command}, S1, DataClass.PRIVATE)
            assert isinstance(answer, ResultResponse)
            assert "rwsr-sr-x" in answer.content  # it was set, inside
            assert "[set-uid and set-gid bits are never kept in the workspace: cleared on" in (
                answer.content
            )
            assert set_id_files(sandbox.workspace) == []
            code = "import os, shutil\nshutil.copy('/bin/true', 'c')\nos.chmod('c', 0o2755)"
            answer = await hands.run("run_cell", {"code": code}, S1, DataClass.PRIVATE)
            assert isinstance(answer, ResultResponse)
            assert "cleared on c]" in answer.content
            assert set_id_files(sandbox.workspace) == []
            nursery.cancel_scope.cancel()
    assert os.lstat(sandbox.workspace / "d").st_mode & stat.S_ISGID  # a folder's shares a group


async def test_what_the_file_tools_make_is_the_sandbox_users_and_a_replaced_file_keeps_its_owner(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    sandbox = given_over(sandbox)
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text('[grants.write_file]\ndecision = "allow"\n'
                           '[grants.shell]\ndecision = "allow"\n')  # fmt: skip
    hands = new_hands(sandbox, Kernels(sandbox, trio.CapacityLimiter(2), idle=60, timeout=10))
    (tmp_path / "home").mkdir()
    broker = Broker(builtin_registry(()), parse_policy(policy_file.read_text(), policy_file),
                    sandbox.workspace, tmp_path / "home", TickingClock(), hands=hands,
                    threads=False)  # fmt: skip
    ws = sandbox.workspace
    theirs = ws / "theirs.txt"
    theirs.write_text("the owner's\n")
    if os.geteuid() == 0:
        os.chown(theirs, 1234, 1234)

    async def call(tool: str, **arguments: str) -> ResultResponse:
        request = ToolRequest(S1, 1, tool, json.dumps(arguments))
        answer = await broker.call(request)
        assert isinstance(answer, ResultResponse), answer
        return answer

    with trio.fail_after(60):
        await call("write_file", path="made/deeper/new.txt", content="made\n")
        await call("write_file", path="theirs.txt", content="replaced\n")
        out = await call("shell", command="echo more >> made/deeper/new.txt && echo edited")
    assert "edited" in out.content  # the sandbox may change what the agent made
    uid = expected_uid(sandbox)
    for made in (ws / "made", ws / "made" / "deeper", ws / "made" / "deeper" / "new.txt"):
        assert made.stat().st_uid == uid, made
    assert (ws / "made" / "deeper" / "new.txt").read_text() == "made\nmore\n"
    assert theirs.read_text() == "replaced\n"
    if os.geteuid() == 0:
        assert (theirs.stat().st_uid, theirs.stat().st_gid) == (1234, 1234)


def test_write_file_and_edit_file_never_keep_a_set_uid_bit(tmp_path: Path) -> None:
    from boxmaker.brokerd.files.file_tools import run_file_tool
    from boxmaker.brokerd.files.roots import Located

    ws = tmp_path / "ws"
    ws.mkdir()
    workspace = Root("workspace", PurePosixPath(ws), True, True, DataClass.PRIVATE)
    for name in ("w", "e"):
        (ws / name).write_text("old\n")
        (ws / name).chmod(0o6755)
    run_file_tool("write_file", {"path": "w", "content": "new\n"}, Located(workspace, ("w",)))
    edit = {"path": "e", "old": "old", "new": "new"}
    run_file_tool("edit_file", edit, Located(workspace, ("e",)))
    for name in ("w", "e"):
        assert (ws / name).read_text() == "new\n"
        assert stat.S_IMODE((ws / name).stat().st_mode) == 0o755, name


async def test_the_sweep_goes_as_deep_as_the_tree_and_into_what_its_owner_closed(
    sandbox: Sandbox,
) -> None:
    sandbox = given_over(sandbox)
    hands = new_hands(sandbox, Kernels(sandbox, trio.CapacityLimiter(2), idle=60, timeout=10))
    command = ("p=.; for i in $(seq 300); do p=$p/d; done; mkdir -p $p; cp /bin/true $p/t; "
               "chmod 4755 $p/t; mkdir c; cp /bin/true c/t; chmod 2755 c/t; chmod 0311 c; "
               "chmod 0755 /workspace")  # fmt: skip
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(hands.kernels.run)
            answer = await hands.run("shell", {"command": command}, S1, DataClass.PRIVATE)
            nursery.cancel_scope.cancel()
    assert isinstance(answer, ResultResponse)
    assert f"{'d/' * 300}t" in answer.content  # its path from the workspace
    (sandbox.workspace / "c").chmod(0o755)  # for this test's own look
    assert set_id_files(sandbox.workspace) == []
    if sandbox.user is not None:  # under root the workspace is its user's alone again
        assert stat.S_IMODE(sandbox.workspace.stat().st_mode) == 0o700


async def test_a_workspace_named_through_a_link_keeps_its_roots_fenced(tmp_path: Path) -> None:
    from boxmaker.brokerd.selftest import broker_self_test

    real = tmp_path / "real"
    (real / "ws" / "vault").mkdir(parents=True)
    (real / "ws" / "vault" / "key").write_text("KEY\n")
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "policy.toml").write_text(
        '[grants.search_files]\ndecision = "allow"\n'
        f'[roots.vault]\npath = "{tmp_path / "link" / "ws" / "vault"}"\nread = false\n'
    )
    config = tmp_path / "config.toml"
    config.write_text(f'[paths]\nhome = "{tmp_path / "home"}"\n'
                      f'[tools]\nworkspace = "{tmp_path / "link" / "ws"}"\n')  # fmt: skip
    with trio.fail_after(60):
        result = await broker_self_test(config, {})
    try:
        assert result.ok, result.checks
        assert result.workspace == real / "ws"
        assert result.policy is not None
        broker = Broker(builtin_registry(()), result.policy, result.workspace,
                        tmp_path / "home", TickingClock(), threads=False)  # fmt: skip
        answer = await broker.call(ToolRequest(S1, 1, "search_files", '{"pattern": "KEY"}'))
        assert isinstance(answer, ResultResponse), answer
        assert "vault/key" not in answer.content
        assert "No match" in answer.content
        assert "1 closed roots" in answer.content
        assert result.sandbox is not None
        if result.sandbox.working:
            out = await shell(result.sandbox, "cat vault/key; ls -A vault")
            assert "KEY" not in out
    finally:
        if result.lock is not None:
            result.lock.release()


async def test_what_the_file_tools_make_in_a_root_outside_the_workspace_is_the_folders_owners(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    theirs = (1234, 1234) if sandbox.user is not None else (os.getuid(), os.getgid())
    if sandbox.user is not None:  # root: a folder of another user's, granted as a root
        os.chown(notes, *theirs)
    policy_file = tmp_path / "policy.toml"
    policy_file.write_text(f'[grants.write_file]\ndecision = "allow"\n'
                           f'[roots.notes]\npath = "{notes}"\nwrite = true\n')  # fmt: skip
    hands = new_hands(sandbox, Kernels(sandbox, trio.CapacityLimiter(2), idle=60, timeout=10))
    (tmp_path / "home").mkdir()
    broker = Broker(builtin_registry(()), parse_policy(policy_file.read_text(), policy_file),
                    sandbox.workspace, tmp_path / "home", TickingClock(), hands=hands,
                    threads=False)  # fmt: skip
    arguments = json.dumps({"path": str(notes / "new" / "page.md"), "content": "x"})
    answer = await broker.call(ToolRequest(S1, 1, "write_file", arguments))
    assert isinstance(answer, ResultResponse), answer
    for made in (notes / "new", notes / "new" / "page.md"):
        assert (made.stat().st_uid, made.stat().st_gid) == theirs, made


async def test_the_hosts_boot_line_is_hidden_and_shared_memory_is_bounded(
    sandbox: Sandbox,
) -> None:
    sizes = "cat /proc/cmdline 2>/dev/null | wc -c; df -k --output=size /dev/shm"
    out = await shell(sandbox, sizes)
    chars, _header, size = out.split()[:3]
    assert chars == "0"
    assert int(size) * 1024 <= sandbox.limits.tmp_bytes  # a tmpfs of `tmp_bytes`, as /tmp
