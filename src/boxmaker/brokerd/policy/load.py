"""The policy file read (`load_policy`): parsed (`rules.py`), checked against the places no
grant may hold, its examples decided (`decide.py`), and its roots held by what they are."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import attrs

from ..files.held_roots import identified, identity_at, resolve_folder
from ._toml import PolicyError
from ._toml import key as _key
from .decide import check_examples
from .rules import Policy, parse_policy, read_policy

__all__ = ["load_policy"]


def load_policy(
    path: Path, workspace: PurePosixPath, protected: Sequence[Path], sealed: Sequence[Path] = ()
) -> Policy:
    """Read and parse the policy at `path`, check that neither the workspace nor any root holds
    one of `protected` (nor the policy file itself) or is inside one of `sealed` (the sessions,
    the memory, brokerd's own state), then check its examples.

    Raises:
        PolicyError: the file cannot be read, is not a policy, grants a place it must not, or
            an example fails."""
    path = path.absolute()
    real_workspace = Path(workspace).resolve()
    policy = parse_policy(
        read_policy(path), path, resolve=lambda given: resolve_folder(given, real_workspace)
    )
    places = [(f"the workspace ({workspace})", real_workspace, "")]
    places += [
        (f"root {r.name} ({r.path})", Path(r.path), _key("roots", r.name, "path"))
        for r in policy.roots
    ]
    for guarded in [*protected, path, *sealed]:
        real = Path(guarded).resolve()
        for shown, folder, key in places:
            inside = guarded in sealed and real in folder.parents
            if real == folder or folder in real.parents or inside:
                raise PolicyError(
                    f"{path}: {shown} {'is inside' if inside else 'holds'} {guarded}: an agent "
                    "that can edit its own grants has none" + (f" @ {key}" if key else "")
                )
    check_examples(policy, workspace)
    try:
        return attrs.evolve(
            policy, roots=identified(policy.roots), workspace_identity=identity_at(workspace)
        )
    except OSError as exc:
        raise PolicyError(f"{path}: cannot look at {exc.filename}: {exc.strerror}") from exc
