"""A model profile: what the loop needs to know of a model to drive it well. Pure.

A profile is a small TOML file shipped in this package (`<name>.toml`): the model's context
window, the cap on each completion's output, how tool calls travel (`native`: the server's
`tools` array and `tool_calls`; `fenced`: tool blocks in the text, `tools/fenced.py`), which
tools a session is given, whether the model reasons, and the notes on the server's chat
template a person needs. A fenced profile also says how results go back and which example
exchanges every request carries. Profiles are read with the one converter, so a mistake in
one is refused with its key, as in the config.
"""

from __future__ import annotations

import tomllib
from importlib import resources
from typing import Any

from attrs import Attribute, field, frozen

from ..proto import DecodeError, InvalidValue, structure

__all__ = [
    "PROFILE_SAMPLING",
    "Example",
    "Profile",
    "ProfileError",
    "load_profile",
    "profile_names",
]

# The sampling a profile may set (`[sampling]`), the config's `[inference]` keys of the same
# names, in llama-server's words; of a profile's, an OpenAI-style server is given temperature
# and top_p only (`infer.request.profile_sampling`).
PROFILE_SAMPLING = (
    "temperature", "top_p", "top_k", "min_p", "seed",
    "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty",
    "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n",
)  # grouped by what each sets # fmt: skip


class ProfileError(Exception):
    """A profile that cannot be read or used; the message names it and the reason."""


def _one_of(*allowed: str) -> Any:
    def check(_instance: Any, attribute: Attribute[str], value: str) -> None:
        if value not in allowed:
            names = " or ".join(repr(a) for a in allowed)
            raise InvalidValue(f"expected {names}, got {value!r}", attribute.name)

    return check


def _sampling_keys(
    _instance: Any, attribute: Attribute[dict[str, float]], value: dict[str, float]
) -> None:
    unknown = sorted(set(value) - set(PROFILE_SAMPLING))
    if unknown:
        raise InvalidValue(
            f"unknown sampling key {unknown[0]!r}; the keys are {', '.join(PROFILE_SAMPLING)}",
            attribute.name,
        )


def _positive(_instance: Any, attribute: Attribute[int | None], value: int | None) -> None:
    if value is not None and value < 1:
        raise InvalidValue(f"must be at least 1, got {value}", attribute.name)


@frozen
class Example:
    """One example exchange of a fenced profile: a question, the tool block that answers it,
    and optionally the tool's result and the answer after it; or, with no `tool`, a question
    answered in plain words (`answer`), so the model sees when not to write a block."""

    user: str
    tool: str | None = None
    arguments: dict[str, Any] = field(factory=dict)
    result: str | None = None
    answer: str | None = None

    def __attrs_post_init__(self) -> None:
        if self.tool is None and self.answer is None:
            raise InvalidValue("an example without a tool needs its plain answer", "answer")


@frozen
class Profile:
    name: str
    description: str
    match: tuple[str, ...] = ()  # lower-case parts of a served model's name that `auto` takes
    context: int | None = field(default=None, validator=_positive)
    output_cap: int | None = field(default=None, validator=_positive)
    tool_mode: str = field(default="native", validator=_one_of("native", "fenced"))
    tools: str = field(default="core", validator=_one_of("core", "all"))
    # With `tools = "all"`: at most these of them (a small model does better with few).
    only_tools: tuple[str, ...] = ()
    thinking: bool = True
    images: bool = False  # an OpenAI-style server of this model takes image parts
    results: str = field(default="user", validator=_one_of("user", "tool"))
    result_prefix: str = "Tool result: "
    result_suffix: str = ""
    notes: str = ""
    examples: tuple[Example, ...] = ()
    # Sampling the model is at its best with (`[inference]` keys the config leaves unset):
    # temperature, top_p, top_k, min_p, a seed, and the server's samplers against repetition.
    sampling: dict[str, float] = field(factory=dict, validator=_sampling_keys)

    def __attrs_post_init__(self) -> None:
        if self.examples and self.tool_mode != "fenced":
            raise InvalidValue("are for the fenced tool mode only", "examples")

    @property
    def fenced(self) -> bool:
        return self.tool_mode == "fenced"


def profile_names() -> list[str]:
    """The profiles shipped in this package, by name."""
    files = resources.files(__package__).iterdir()
    return sorted(f.name.removesuffix(".toml") for f in files if f.name.endswith(".toml"))


def parse_profile(name: str, text: str) -> Profile:
    """Raises `ProfileError` naming the profile, the key and the reason."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {name!r}: not valid TOML: {exc}") from exc
    try:
        return structure({"name": name, **raw}, Profile)
    except DecodeError as exc:
        raise ProfileError(f"profile {name!r}: {exc}") from exc


def load_profile(name: str) -> Profile:
    """The shipped profile `name`.

    Raises:
        ProfileError: there is none by that name (the message lists those there are), or it
            is not a valid profile.
    """
    if name not in profile_names():
        raise ProfileError(f"no model profile {name!r}; there are: {', '.join(profile_names())}")
    text = resources.files(__package__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return parse_profile(name, text)
