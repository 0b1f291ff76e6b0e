"""Building the selection :class:`~selection.catalog.policy.Policy` from settings and the
optional TOML policy file (stdlib ``tomllib``).

Precedence per knob: a ``TOOLPRUNE_*`` variable that is set explicitly, then the policy
file, then the settings default. ``core`` patterns from both sources are combined.

Policy file shape::

    core = ["get_me", "search_*"]      # names or glob patterns
    top_k = 8
    threshold = 0.2                    # τ, inclusive
    max_tools = 16
    min_catalog_tools = 8
    min_saving = 0.0                   # share of tool tokens pruning must save
    preload_deferred = true            # rank-load from the client's deferred tools
    derive_bundles = true              # group `server__tool` names by server
    max_bundle_size = 4

    [[bundles]]
    name = "pull requests"
    description = "review and merge"
    members = ["create_pull_request", "merge_pull_request"]

    [examples]
    get_me = ["who am I logged in as?"]

    [[text_formats]]                   # tool blocks written in system prompts
    name = "my-agent"
    start = "<available_tools>"        # regexes; start/end optional
    end = "</available_tools>"
    entry = "^tool (?P<name>[\\w-]+):"
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from config.settings import Settings
from selection.catalog.policy import Bundle, CandidatePolicy, Policy
from selection.catalog.text_path import PRESETS, TextFormat, custom_format
from selection.errors import PolicyError

_KNOBS = (
    "top_k", "threshold", "max_tools", "min_catalog_tools", "min_saving", "preload_deferred"
)


class _StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class BundleEntry(_StrictModel):
    """One ``[[bundles]]`` table."""

    name: str
    members: list[str]
    description: str = ""


class TextFormatEntry(_StrictModel):
    """One ``[[text_formats]]`` table: regexes (Python ``re`` syntax)."""

    name: str
    entry: str
    start: str | None = None
    end: str | None = None


class PolicyFile(_StrictModel):
    """The policy file's schema: types and ranges as strict as the settings'."""

    core: list[str] = []
    top_k: int | None = Field(None, ge=0)
    threshold: float | None = Field(None, ge=-1.0, le=1.0)
    max_tools: int | None = Field(None, ge=1)
    min_catalog_tools: int | None = Field(None, ge=0)
    min_saving: float | None = Field(None, le=1.0)
    preload_deferred: bool | None = None
    derive_bundles: bool = True
    max_bundle_size: int = Field(4, ge=1)
    bundles: list[BundleEntry] = []
    examples: dict[str, list[str]] = {}
    text_formats: list[TextFormatEntry] = []


def _text_formats(setting: str, entries: list[TextFormatEntry]) -> tuple[TextFormat, ...]:
    try:
        custom = [custom_format(e.name, e.entry, e.start, e.end) for e in entries]
    except ValueError as exc:
        raise PolicyError(f"invalid text format: {exc}") from exc
    formats = (*custom, *PRESETS)
    if setting == "auto":
        return formats
    if setting == "off":
        return ()
    chosen = tuple(fmt for fmt in formats if fmt.name == setting)
    if not chosen:
        raise PolicyError(f"unknown text format {setting!r}")
    return chosen[:1]


def read_policy_file(path: Path) -> dict[str, Any]:
    """Parse the TOML file. Raises PolicyError when unreadable or not TOML."""
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise PolicyError(f"cannot read policy file {path}: {exc}") from exc


def load_policy(settings: Settings, data: dict[str, Any] | None = None) -> Policy:
    """The policy for ``settings``; ``data`` is the parsed policy file (read from
    ``settings.policy_file`` when None).

    Raises PolicyError on unknown keys (a typo must not silently disable a knob), wrong
    types or out-of-range values.
    """
    if data is None:
        data = read_policy_file(settings.policy_file) if settings.policy_file else {}
    try:
        parsed = PolicyFile.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(f"invalid policy file: {exc}") from exc
    knobs: dict[str, Any] = {}
    for knob in _KNOBS:
        from_file = getattr(parsed, knob)
        explicit = knob in settings.model_fields_set
        knobs[knob] = getattr(settings, knob) if explicit or from_file is None else from_file
    return Policy(
        core=tuple(dict.fromkeys([*settings.core, *parsed.core])),
        bundles=tuple(Bundle(b.name, tuple(b.members), b.description) for b in parsed.bundles),
        examples={name: tuple(items) for name, items in parsed.examples.items()},
        derive_bundles=parsed.derive_bundles,
        max_bundle_size=parsed.max_bundle_size,
        text_formats=_text_formats(settings.text_format, parsed.text_formats),
        candidates=CandidatePolicy(
            named_only=settings.named_only,
            token_budget=settings.token_budget,
            dominance_margin=settings.dominance_margin,
            tier_size=settings.tier_size,
        ),
        refresh_rank=settings.refresh_rank,
        refresh_top_k=settings.refresh_top_k,
        refresh_share=settings.refresh_share,
        top_k_configured="top_k" in settings.model_fields_set or parsed.top_k is not None,
        **knobs,
    )
