"""Building the selection :class:`~selection.policy.Policy` from settings and the
optional TOML policy file (stdlib ``tomllib``).

Precedence per knob: a ``TOOLPRUNE_*`` variable that is set explicitly, then the policy
file, then the settings default. ``core`` patterns from both sources are combined.

Policy file shape::

    core = ["get_me", "search_*"]      # names or glob patterns
    top_k = 8
    threshold = 0.2                    # τ, inclusive
    max_tools = 16
    min_catalog_tools = 8
    derive_bundles = true              # group `server__tool` names by server
    max_bundle_size = 4

    [[bundles]]
    name = "pull requests"
    description = "review and merge"
    members = ["create_pull_request", "merge_pull_request"]

    [examples]
    get_me = ["who am I logged in as?"]
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from config.settings import Settings
from selection.errors import PolicyError
from selection.policy import Bundle, Policy

_KNOBS = ("top_k", "threshold", "max_tools", "min_catalog_tools")
_FILE_ONLY = ("derive_bundles", "max_bundle_size")
_KNOWN_KEYS = {"core", "bundles", "examples", *_KNOBS, *_FILE_ONLY, "text_formats"}


def read_policy_file(path: Path) -> dict[str, Any]:
    """Parse the TOML file. Raises PolicyError when unreadable, not TOML, or with unknown
    top-level keys (a typo must not silently disable a setting)."""
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PolicyError(f"cannot read policy file {path}: {exc}") from exc
    unknown = set(data) - _KNOWN_KEYS
    if unknown:
        raise PolicyError(f"unknown keys in policy file {path}: {sorted(unknown)}")
    return data


def _string_list(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise PolicyError(f"{what} must be a list of strings")
    return tuple(value)


def _bundles(value: Any) -> tuple[Bundle, ...]:
    if not isinstance(value, list):
        raise PolicyError("bundles must be an array of tables")
    bundles = []
    for entry in value:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise PolicyError("each bundle needs a name")
        members = _string_list(entry.get("members"), f"bundle {entry['name']!r} members")
        description = entry.get("description", "")
        if not isinstance(description, str):
            raise PolicyError(f"bundle {entry['name']!r} description must be a string")
        bundles.append(Bundle(entry["name"], members, description))
    return tuple(bundles)


def _examples(value: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise PolicyError("examples must be a table of tool name → list of utterances")
    return {name: _string_list(items, f"examples for {name!r}") for name, items in value.items()}


def load_policy(settings: Settings, data: dict[str, Any] | None = None) -> Policy:
    """The policy for ``settings``; ``data`` is the parsed policy file (read from
    ``settings.policy_file`` when None). Raises PolicyError."""
    if data is None:
        data = read_policy_file(settings.policy_file) if settings.policy_file else {}
    knobs: dict[str, Any] = {}
    for knob in _KNOBS:
        explicit = knob in settings.model_fields_set
        knobs[knob] = getattr(settings, knob) if explicit or knob not in data else data[knob]
    for knob in _FILE_ONLY:
        if knob in data:
            knobs[knob] = data[knob]
    core = tuple(dict.fromkeys([*settings.core, *_string_list(data.get("core", []), "core")]))
    try:
        policy = Policy(
            core=core,
            bundles=_bundles(data.get("bundles", [])),
            examples=_examples(data.get("examples", {})),
            **knobs,
        )
    except TypeError as exc:
        raise PolicyError(f"invalid policy: {exc}") from exc
    if not isinstance(policy.top_k, int) or not isinstance(policy.max_tools, int):
        raise PolicyError("top_k and max_tools must be integers")
    if not isinstance(policy.threshold, int | float):
        raise PolicyError("threshold must be a number")
    return policy
