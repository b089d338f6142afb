"""`loopd replay` (and `bxctl replay`, which runs it): replay a session, or every session of
the home, and say whether each is identical (SPEC section 20).

    loopd replay SESSION [--turn N | --from N | --epoch E] [--home H] [--config FILE] [--json]
                 [--step]
    loopd replay --all [--home H] [--config FILE] [--json] [--seconds S]
    loopd replay SESSION --with profile=P | server=NAME | config=FILE [--live-tools] [--json]

Exit status: 0 identical; 1 a difference; 3 a log that lacks an input (written before
replay); 2 a bad argument or a session that cannot be read. It opens no socket and no
connection: nothing of the server or brokerd is needed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import TextIO

import trio
import trio.testing

from ... import layout
from ...config import (
    DEFAULT_HOME,
    DEFAULT_SERVER,
    Config,
    ConfigError,
    load_config,
    parse_config,
)
from ...profiles import ProfileError
from ...serving import BrokerPort
from ...session import SessionError
from ...store import session_folders
from .driver import replay, select_runs, start_of
from .errors import MissingInput
from .report import Report, as_json, said, side_by_side, side_by_side_json, summary_table
from .scratch import read_tape
from .step import Request, step_through
from .tape import Run, Tape
from .what_if import what_if

__all__ = ["build_parser", "run_replay"]

EXIT_DIFFERENT, EXIT_USAGE, EXIT_MISSING = 1, 2, 3
ALL_SECONDS = 60.0  # what --all gives each session by default


def build_parser(prog: str = "loopd replay") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Run a session's recorded turns again through the loop, every answer "
        "(the model's, the tools', the owner's, the clock's) taken from its log, and say "
        "whether the log written again is the same, byte for byte, or where it first "
        "differs. Nothing is sent to a server or to brokerd; the session is not written.",
        epilog="exit status: 0 identical, 1 a difference, 2 a bad argument, 3 the log lacks "
        "an input (written by a loopd from before replay)",
    )
    parser.add_argument("session", nargs="?", help="the session's id")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--turn", type=int, help="replay only this turn (1 is the first)")
    which.add_argument("--from", dest="since", type=int, help="replay from this turn on")
    which.add_argument("--epoch", type=int, help="replay only the turns of this epoch")
    which.add_argument("--all", action="store_true", help="replay every session of the home")
    parser.add_argument("--home", type=Path, help="the home (default: $BOXMAKER_HOME, else "
                        f"{DEFAULT_HOME}; or the --config's)")  # fmt: skip
    parser.add_argument(
        "--config",
        type=Path,
        help="replay under this config's turn settings instead of those each turn recorded "
        "(to see what a change would do)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object a session")
    parser.add_argument(
        "--with",
        dest="with_",
        metavar="KEY=VALUE",
        help="send the session's messages again, live, with profile=NAME, server=NAME or "
        "config=FILE, into a new session, and set the two side by side (a recorded call's "
        "result answers the same call; any other is not run)",
    )
    parser.add_argument(
        "--live-tools",
        action="store_true",
        help="with --with, run the calls the recording does not hold through brokerd",
    )
    parser.add_argument(
        "--step",
        action="store_true",
        help="at a terminal, show the turns one record at a time, each request before the "
        "completion it brought: n next, c continue, q quit",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        default=ALL_SECONDS,
        help=f"with --all, the most a session is given (default: {ALL_SECONDS:g})",
    )
    return parser


def run_replay(argv: list[str], out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.session is None) == (not args.all):
        parser.error("name a session, or give --all")
    try:
        config = _config(args.config, args.home)
    except (ConfigError, OSError) as error:
        err.write(f"loopd replay: {error}\n")
        return EXIT_USAGE
    home = args.home or config.paths.home
    own = args.config is not None
    if args.all:
        return _replay_all(home, config, own, args, out, err)
    folder = layout.session_folder(home, args.session)
    try:
        tape = read_tape(folder)
        runs = select_runs(tape, turn=args.turn, since=args.since, epoch=args.epoch)
    except (OSError, SessionError, ValueError) as error:
        err.write(f"loopd replay: session {args.session}: {error}\n")
        return EXIT_USAGE
    if args.with_:
        return _what_if(args, home, folder, tape, runs, config, out, err)
    requests: list[Request] | None = [] if args.step else None
    report = _run(partial(replay, folder, runs, tape, config, own_config=own, requests=requests))
    if requests is not None and runs:
        found = report.difference
        end = runs[-1].last if found is None or found.recorded_at is None else found.recorded_at
        if step_through(tape, start_of(tape, runs[0]), end, requests, _key(), out):
            return _status(report)
    out.write(json.dumps(as_json(report)) + "\n" if args.json else said(report))
    return _status(report)


def _what_if(
    args: argparse.Namespace,
    home: Path,
    folder: Path,
    tape: Tape,
    runs: list[Run],
    config: Config,
    out: TextIO,
    err: TextIO,
) -> int:
    """`--with`: the messages sent again, live; the report side by side."""
    key, _, value = args.with_.partition("=")
    if key not in ("profile", "server", "config") or not value:
        err.write("loopd replay: --with takes profile=NAME, server=NAME or config=FILE\n")
        return EXIT_USAGE
    try:
        if key == "config":
            config = load_config(Path(value))
        if key == "server" and value != DEFAULT_SERVER and value not in config.servers:
            raise ConfigError(f"no server named {value} in the config")
        live = None
        if args.live_tools:
            live = BrokerPort(config.broker.socket, config.tools.call_timeout_s)
        found = trio.run(
            partial(
                what_if, home, folder, tape, runs, config,
                profile=value if key == "profile" else None,
                server=value if key == "server" else None,
                changed=args.with_, live=live,
            )
        )  # fmt: skip
    except (ConfigError, ProfileError, OSError, SessionError) as error:
        err.write(f"loopd replay: {error}\n")
        return EXIT_USAGE
    except MissingInput as missing:  # a file a recorded message carried
        err.write(f"loopd replay: the log lacks an input: {missing}\n")
        return EXIT_MISSING
    out.write(json.dumps(side_by_side_json(found)) + "\n" if args.json else side_by_side(found))
    return 0


def _key() -> Callable[[], str]:
    """What reads the person's answer: one key at a terminal, else a line."""
    if not sys.stdin.isatty():
        return lambda: sys.stdin.readline() or "q"
    import termios
    import tty

    def key() -> str:
        fd = sys.stdin.fileno()
        before = termios.tcgetattr(fd)
        try:
            tty.setcbreak(fd)
            return sys.stdin.read(1) or "q"
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, before)

    return key


def _replay_all(
    home: Path, config: Config, own: bool, args: argparse.Namespace, out: TextIO, err: TextIO
) -> int:
    folders = session_folders(home)
    rows: list[tuple[Report | None, str]] = []
    worst = 0
    for count, folder in enumerate(folders, 1):
        err.write(f"replaying {count}/{len(folders)}: {folder.name}\n")
        try:
            tape = read_tape(folder)
        except (OSError, SessionError) as error:
            rows.append((None, f"{folder.name}: cannot be read: {error}"))
            worst = max(worst, EXIT_USAGE)
            continue
        deadline = time.monotonic() + args.seconds
        report = _run(
            partial(replay, folder, tape.runs, tape, config, own_config=own, deadline=deadline)
        )
        rows.append((report, ""))
        worst = max(worst, _status(report))
        if args.json:
            out.write(json.dumps(as_json(report)) + "\n")
    if not args.json:
        out.write(summary_table(rows))
    return worst


def _run(replaying: Callable[[], Awaitable[Report]]) -> Report:
    """Run a replay under a mock clock that jumps to each deadline (a turn's time limit falls
    at once; no real time is waited)."""
    clock = trio.testing.MockClock(autojump_threshold=0)
    report: Report = trio.run(replaying, clock=clock)
    return report


def _status(report: Report) -> int:
    if report.missing is not None:
        return EXIT_MISSING
    return 0 if report.identical else EXIT_DIFFERENT


def _config(path: Path | None, home: Path | None) -> Config:
    """The config replay runs under: the file given, else the defaults (the home's
    `$BOXMAKER_HOME` or `--home`)."""
    if path is not None:
        return load_config(path)
    environ = dict(os.environ)
    if home is not None:
        environ["BOXMAKER_HOME"] = str(home)
    return parse_config("", Path("replay.toml"), environ)
