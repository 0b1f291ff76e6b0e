"""Tests for config.policy: the TOML policy file and its precedence with settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.policy import load_policy, read_policy_file
from config.settings import Settings
from selection.catalog.policy import Bundle, Policy
from selection.errors import PolicyError

FULL = """
core = ["get_me", "search_*"]
top_k = 5
threshold = 0.2
max_tools = 12
min_catalog_tools = 20
derive_bundles = false
max_bundle_size = 6

[[bundles]]
name = "pull requests"
description = "review and merge"
members = ["create_pull_request", "merge_pull_request"]

[[bundles]]
name = "files"
members = ["get_file_contents", "create_or_update_file"]

[examples]
get_me = ["who am I logged in as?", "what is my username"]
list_issues = ["show open bugs"]
"""


@pytest.fixture(autouse=True)
def _no_toolprune_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in list(os.environ):
        if key.upper().startswith("TOOLPRUNE_"):
            monkeypatch.delenv(key)


def write(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- file


def test_a_full_policy_file_is_loaded(tmp_path: Path) -> None:
    policy = load_policy(Settings(policy_file=write(tmp_path, FULL)))
    assert policy.core == ("get_me", "search_*")
    assert (policy.top_k, policy.threshold, policy.max_tools, policy.min_catalog_tools) == (
        5,
        0.2,
        12,
        20,
    )
    assert policy.derive_bundles is False
    assert policy.max_bundle_size == 6
    assert policy.bundles == (
        Bundle("pull requests", ("create_pull_request", "merge_pull_request"), "review and merge"),
        Bundle("files", ("get_file_contents", "create_or_update_file"), ""),
    )
    assert dict(policy.examples) == {
        "get_me": ("who am I logged in as?", "what is my username"),
        "list_issues": ("show open bugs",),
    }


def test_no_policy_file_gives_the_settings_defaults() -> None:
    settings = Settings()
    policy = load_policy(settings)
    assert policy.core == ()
    assert (policy.top_k, policy.threshold, policy.max_tools, policy.min_catalog_tools) == (
        settings.top_k,
        settings.threshold,
        settings.max_tools,
        settings.min_catalog_tools,
    )
    assert policy.bundles == () and dict(policy.examples) == {}
    assert policy.derive_bundles == Policy().derive_bundles
    assert policy.max_bundle_size == Policy().max_bundle_size


def test_an_empty_policy_file_is_valid(tmp_path: Path) -> None:
    assert load_policy(Settings(policy_file=write(tmp_path, ""))) == load_policy(Settings())


def test_parsed_data_can_be_given_instead_of_a_file() -> None:
    policy = load_policy(Settings(), {"top_k": 3, "core": ["x"]})
    assert policy.top_k == 3 and policy.core == ("x",)


def test_unknown_top_level_keys_raise_policy_error(tmp_path: Path) -> None:
    path = write(tmp_path, "top_k = 4\nthreshhold = 0.3\n")
    assert read_policy_file(path) == {"top_k": 4, "threshhold": 0.3}
    with pytest.raises(PolicyError, match="threshhold"):
        load_policy(Settings(policy_file=path))
    with pytest.raises(PolicyError):
        load_policy(Settings(policy_file=path))


def test_a_missing_policy_file_raises_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError):
        load_policy(Settings(policy_file=tmp_path / "absent.toml"))


def test_a_file_that_is_not_toml_raises_policy_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError):
        read_policy_file(write(tmp_path, "core = [get_me\n"))


def test_policy_error_is_a_value_error() -> None:
    assert issubclass(PolicyError, ValueError)


@pytest.mark.parametrize(
    "text",
    [
        'core = "get_me"',
        "core = [1, 2]",
        'bundles = "x"',
        "bundles = [1]",
        '[[bundles]]\nmembers = ["a", "b"]',
        '[[bundles]]\nname = 3\nmembers = ["a"]',
        '[[bundles]]\nname = "b"',
        '[[bundles]]\nname = "b"\nmembers = "a"',
        '[[bundles]]\nname = "b"\nmembers = ["a"]\ndescription = 5',
        'examples = ["x"]',
        '[examples]\nget_me = "who am I"',
        "[examples]\nget_me = [1]",
        'top_k = "many"',
        "top_k = 2.5",
        'max_tools = "10"',
        'threshold = "high"',
    ],
)
def test_invalid_values_raise_policy_error(tmp_path: Path, text: str) -> None:
    with pytest.raises(PolicyError):
        load_policy(Settings(policy_file=write(tmp_path, text)))


@pytest.mark.parametrize(
    "text",
    [
        'min_catalog_tools = "8"',
        'max_bundle_size = "4"',
        'derive_bundles = "no"',
        "max_tools = 0",
        "top_k = -1",
        "threshold = 2.0",
    ],
)
def test_file_knobs_are_validated_like_the_settings(tmp_path: Path, text: str) -> None:
    with pytest.raises(PolicyError):
        load_policy(Settings(policy_file=write(tmp_path, text)))


def test_an_integer_threshold_in_the_file_is_accepted(tmp_path: Path) -> None:
    assert load_policy(Settings(policy_file=write(tmp_path, "threshold = 0"))).threshold == 0


# --------------------------------------------------------------------------- precedence


def test_an_explicitly_set_settings_field_beats_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "top_k = 5\nthreshold = 0.2\nmax_tools = 12\nmin_catalog_tools = 20\n")
    settings = Settings(policy_file=path, top_k=3, threshold=0.4, max_tools=7, min_catalog_tools=2)
    policy = load_policy(settings)
    assert (policy.top_k, policy.threshold, policy.max_tools, policy.min_catalog_tools) == (
        3,
        0.4,
        7,
        2,
    )


def test_an_explicit_setting_equal_to_the_default_still_beats_the_file(tmp_path: Path) -> None:
    default = Settings().top_k
    path = write(tmp_path, f"top_k = {default + 3}\n")
    assert load_policy(Settings(policy_file=path, top_k=default)).top_k == default


def test_an_environment_variable_counts_as_explicitly_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLPRUNE_TOP_K", "2")
    monkeypatch.setenv("TOOLPRUNE_POLICY_FILE", str(write(tmp_path, "top_k = 5\nmax_tools = 9\n")))
    policy = load_policy(Settings())
    assert policy.top_k == 2
    assert policy.max_tools == 9


def test_the_file_beats_the_settings_default(tmp_path: Path) -> None:
    policy = load_policy(Settings(policy_file=write(tmp_path, "max_tools = 9\n")))
    assert policy.max_tools == 9
    assert policy.top_k == Settings().top_k  # not in the file: the default


def test_core_from_settings_and_file_are_combined_without_duplicates(tmp_path: Path) -> None:
    path = write(tmp_path, 'core = ["search_*", "get_me"]\n')
    policy = load_policy(Settings(policy_file=path, core=["get_me", "list_*"]))
    assert policy.core == ("get_me", "list_*", "search_*")


def test_core_from_a_comma_separated_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TOOLPRUNE_CORE", "get_me, search_* ,,list_issues")
    assert load_policy(Settings()).core == ("get_me", "search_*", "list_issues")


def test_file_only_knobs_come_from_the_file(tmp_path: Path) -> None:
    policy = load_policy(
        Settings(policy_file=write(tmp_path, "derive_bundles = false\nmax_bundle_size = 2\n"))
    )
    assert policy.derive_bundles is False and policy.max_bundle_size == 2


def test_text_formats_is_an_accepted_key(tmp_path: Path) -> None:
    read_policy_file(write(tmp_path, 'text_formats = ["tools_block"]\n'))
