"""Model profiles: a small TOML file per model (or kind of model) shipped here, and `auto`,
which picks one from what the server says of its model. Pure."""

from ._profile import (
    PROFILE_SAMPLING,
    Example,
    Profile,
    ProfileError,
    load_profile,
    parse_profile,
    profile_names,
)
from .choose import Choice, ServerFacts, choose_profile, resolve_profile

__all__ = [
    "PROFILE_SAMPLING",
    "Choice",
    "Example",
    "Profile",
    "ProfileError",
    "ServerFacts",
    "choose_profile",
    "load_profile",
    "parse_profile",
    "profile_names",
    "resolve_profile",
]
