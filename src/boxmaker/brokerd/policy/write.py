"""The owner's `always`, written into `policy.toml`: the tool's grant set to allow (with the
definition it was given, for an MCP tool), every other byte of the file kept, atomically.
"""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path, PurePosixPath

import attrs
import tomlkit
from tomlkit.items import Comment, Table, Whitespace

from ...store import FileSystem
from ._toml import Decision, PolicyError
from ._toml import key as _key
from .decide import check_examples
from .rules import NO_GRANT, Policy, parse_policy, read_policy

__all__ = ["write_always"]


def write_always(
    policy: Policy, tool: str, workspace: PurePosixPath, definition: str | None = None
) -> Policy:
    """The owner answered `always`: write `[grants.<tool>] decision = "allow"` into the file
    (and `definition`, an MCP tool's hash as it was asked for), every other byte kept, once
    the examples hold with it; atomically, keeping the file's mode. Nothing is written when the
    policy already allows `tool` (with that definition).

    Raises:
        PolicyError: the tool takes no grant or is denied, the file changed since `policy` was
            read, an example would fail (the file is left as it was), or a read or write failed.
    """
    if tool in NO_GRANT:
        raise PolicyError(f"{policy.path}: {tool} takes no grant: {NO_GRANT[tool]}")
    grant = policy.grant(tool)
    if grant.decision is Decision.ALLOW and grant.definition == definition:
        return policy
    if grant.decision is Decision.DENY:
        key = _key("grants", tool, "decision")
        raise PolicyError(f"{policy.path}: 'always' does not lift a deny; edit it @ {key}")
    text = read_policy(policy.path)
    if parse_policy(text, policy.path) != policy:
        raise PolicyError(f"{policy.path}: changed since it was loaded: load it again first")
    new_text = _with_allow(text, tool, policy.path, definition)
    new = parse_policy(new_text, policy.path)
    check_examples(new, workspace)
    _replace(policy.path.resolve(), new_text)
    # Its roots are unchanged (the file was `policy`'s): each stays the folder it was granted as.
    return attrs.evolve(new, roots=policy.roots, workspace_identity=policy.workspace_identity)


def _with_allow(text: str, tool: str, path: Path, definition: str | None) -> str:
    """`text` with the tool's decision "allow" (and its definition), and not another byte of it
    changed."""
    doc = tomlkit.parse(text)
    if (grants := doc.get("grants")) is None:
        doc.append("grants", grants := tomlkit.table(is_super_table=True))
    pinned = {"definition": definition} if definition is not None else {}
    if tool in grants:
        grants[tool]["decision"] = "allow"  # tomlkit keeps the line's comment
        grants[tool].update(pinned)
    else:
        table = tomlkit.table() if isinstance(grants, Table) else tomlkit.inline_table()
        table.add("decision", "allow")
        for name, value in pinned.items():
            table.add(name, value)
        body = grants.value.body if isinstance(grants, Table) else []
        if body and isinstance(last := body[-1][1], Table):
            # The blank lines and comments ending the last grant belong to what follows them.
            end = last.value.body
            while end and end[-1][0] is None and isinstance(end[-1][1], Whitespace | Comment):
                table.value.body.insert(1, end.pop())
        grants[tool] = table
    new_text = doc.as_string()
    expected = tomllib.loads(text)
    expected.setdefault("grants", {}).setdefault(tool, {}).update(decision="allow", **pinned)
    if tomllib.loads(new_text) != expected:
        raise PolicyError(f"{path}: cannot add the grant and keep the rest: edit it @ $.grants")
    return new_text


def _replace(path: Path, text: str) -> None:
    """Replace the file at `path` with `text` atomically, keeping its mode."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        FileSystem().replace_file(path, text.encode("utf-8"), mode=mode)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot write the policy: {exc.strerror}") from exc
