"""`auto`: the profile for the model a server serves, from what the server says of itself.
Pure; asking the server (`/props`, or `/v1/models` of an OpenAI-style server) is `infer`'s.

In order: a profile whose `match` names part of the served model's name; else `fenced` when
the server says its chat template has no tool calls (the model would never make one); else
`native`. The context window is the server's own figure when it gives one, else the
profile's. `Choice.reason` says which rule chose, in words, for the self-test.
"""

from __future__ import annotations

import attrs
from attrs import frozen

from ._profile import Profile, load_profile, profile_names

__all__ = ["Choice", "ServerFacts", "choose_profile", "resolve_profile"]


@frozen
class ServerFacts:
    """What a server says of its model: its name, its context window, whether its chat
    template makes tool calls. `None` for what it does not say."""

    model: str | None = None
    n_ctx: int | None = None
    tool_calls: bool | None = None


@frozen
class Choice:
    profile: Profile
    reason: str


def _model_name(model: str) -> str:
    """The file name of a model path, lower case (`/x/SmolLM2-135M.gguf` -> `smollm2-135m.gguf`)."""
    return model.replace("\\", "/").rsplit("/", 1)[-1].casefold()


def choose_profile(facts: ServerFacts) -> Choice:
    """The profile `auto` takes for a server that says `facts`."""
    profiles = [load_profile(name) for name in profile_names()]
    said = []
    if facts.model:
        name = _model_name(facts.model)
        for profile in profiles:
            hit = next((part for part in profile.match if part in name), None)
            if hit is not None:
                return _with_context(profile, facts, f"the server serves {name} ({hit!r})")
        said.append(f"no profile matches the model {name}")
    if facts.tool_calls is False:
        said.append("its chat template has no tool calls")
        return _with_context(load_profile("fenced"), facts, "; ".join(said))
    said.append(
        "its chat template makes tool calls"
        if facts.tool_calls
        else "the server does not say whether its template makes tool calls"
    )
    return _with_context(load_profile("native"), facts, "; ".join(said))


def _with_context(profile: Profile, facts: ServerFacts, reason: str) -> Choice:
    if facts.n_ctx is not None:
        profile = attrs.evolve(profile, context=facts.n_ctx)
        reason += f"; context {facts.n_ctx} tokens (the server's)"
    elif profile.context is not None:
        reason += f"; context {profile.context} tokens (the profile's)"
    return Choice(profile, reason)


def resolve_profile(setting: str, facts: ServerFacts | None) -> Choice:
    """The profile for `[model] profile = setting` on a server that says `facts`."""
    if setting == "auto":
        return choose_profile(facts or ServerFacts())
    profile = load_profile(setting)
    if facts is not None and facts.n_ctx is not None:
        return _with_context(profile, facts, "named in the config")
    return Choice(profile, "named in the config")
