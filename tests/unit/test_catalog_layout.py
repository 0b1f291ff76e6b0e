"""Tests for selection.catalog.policy.catalog_layout: what depends only on the catalogue and the
policy (CORE names, bundles, bundle-mates) is computed once per catalogue and policy."""

from __future__ import annotations

from selection.catalog import policy as policy_module
from selection.catalog.catalog import Catalog, build_catalog, parse_tools
from selection.catalog.groups import Group, find_groups
from selection.catalog.policy import Bundle, Policy, bundle_mates, catalog_bundles, catalog_layout


def catalog_of(*names: str) -> Catalog:
    return parse_tools(
        [{"type": "function", "function": {"name": name, "description": name}} for name in names]
    )


NAMES = ("get_me", "search_code", "gh__a", "gh__b", "jira__x", "jira__y", "jira__z", "plain")


def test_the_layout_is_what_the_uncached_functions_compute() -> None:
    catalog = catalog_of(*NAMES)
    policy = Policy(core=("get_me", "search_*"), bundles=(Bundle("pair", ("plain", "gh__a")),),
                    max_bundle_size=2)
    layout = catalog_layout(catalog, policy)
    assert layout.core == ("get_me", "search_code")
    assert list(layout.bundles) == catalog_bundles(catalog, policy)
    assert layout.mates == bundle_mates(catalog_bundles(catalog, policy), 2)
    assert "jira__x" not in layout.mates  # its namespace has 3 members, over the size limit
    bundles = [Group(b.name, b.members, b.description, "bundle") for b in policy.bundles]
    assert layout.groups == find_groups(catalog, bundles)


def test_a_catalogue_seen_again_reuses_its_layout_even_parsed_anew() -> None:
    policy = Policy(core=("get_me",))
    first = catalog_layout(catalog_of(*NAMES), policy)
    assert catalog_layout(catalog_of(*NAMES), policy) is first


def test_another_policy_or_catalogue_gets_its_own_layout() -> None:
    policy = Policy(core=("get_me",))
    layout = catalog_layout(catalog_of(*NAMES), policy)
    other_policy = catalog_layout(catalog_of(*NAMES), Policy(core=("plain",)))
    assert other_policy is not layout and other_policy.core == ("plain",)
    other_catalog = catalog_layout(catalog_of(*NAMES[:-1]), policy)
    assert other_catalog is not layout and other_catalog.core == ("get_me",)


def test_a_catalogue_without_fingerprint_is_computed_each_time() -> None:
    parsed = catalog_of(*NAMES)
    bare = Catalog(parsed.tools, _by_name={t.name: i for i, t in enumerate(parsed.tools)})
    policy = Policy(core=("get_me",))
    assert catalog_layout(bare, policy) is not catalog_layout(bare, policy)
    assert catalog_layout(bare, policy) == catalog_layout(parsed, policy)


def test_the_cache_is_bounded() -> None:
    policy = Policy()
    for n in range(policy_module.LAYOUT_CACHE_SIZE + 10):
        catalog_layout(build_catalog(catalog_of(f"t{n}", f"u{n}").tools), policy)
    assert len(policy_module._layouts) == policy_module.LAYOUT_CACHE_SIZE
