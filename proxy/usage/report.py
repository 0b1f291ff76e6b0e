"""The terminal rendering of ``toolprune usage report`` (the JSON-ready report of
:func:`proxy.usage.analysis.analyse`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from proxy.usage.records import FORWARDED, HISTORY, LOADED, MISS


def _fmt(value: float | None, pattern: str) -> str:
    return "–" if value is None else format(value, pattern)


def format_report(report: Mapping[str, Any], *, limit: int | None = 40) -> str:
    """The terminal rendering of :func:`analyse`'s report."""
    requests = report["requests"]
    calls = report["calls"]
    lines = [
        f"requests: {requests['acting']} acting ({requests['pruned']} pruned, "
        f"{requests['dry_run']} dry-run), {requests['fallback']} fallbacks"
        + (
            " (" + ", ".join(f"{k} {v}" for k, v in requests["fallback_reasons"].items()) + ")"
            if requests["fallback_reasons"]
            else ""
        )
        + f"; {report['conversations']} conversations; {requests['meta_calls']} meta-calls",
        (
            f"tool calls: {calls['total']} ({calls[FORWARDED]} forwarded, {calls[LOADED]} "
            f"through load_tools, {calls[MISS]} misses, {calls[HISTORY]} seen only in histories)"
        ),
        "",
        (
            f"{'tool':<36} {'calls':>6} {'conv%':>6} {'1st turn':>8} {'loaded':>7} "
            f"{'misses':>7} {'history':>8}"
        ),
    ]
    tools = report["tools"]
    for row in tools if limit is None else tools[:limit]:
        lines.append(
            f"{row['tool']:<36} {row['calls']:>6} {row['conversation_share'] * 100:>5.1f}% "
            f"{_fmt(row['median_first_turn'], 'g'):>8} {row['loaded']:>7} {row['misses']:>7} "
            f"{row['history']:>8}"
        )
    if limit is not None and len(tools) > limit:
        lines.append(f"… {len(tools) - limit} more tools (--json for all)")
    core = report["core"]
    saving = core["saving"]
    lines += [
        "",
        (
            f"suggested CORE ({len(core['names'])} tools: {_fmt(core['covered_share'], '.1%')} "
            f"of calls; target {core['core_share']:.0%}, plus first-turn tools in ≥"
            f"{core['first_turn_share']:.0%} of conversations):"
        ),
        "  core = " + json.dumps(core["names"]),
    ]
    if core["first_turn"]:
        lines.append("  first-turn tools among them: " + ", ".join(core["first_turn"]))
    if saving["requests"]:
        tokens = (
            f"{saving['saving_tokens_total']} tokens (tokenizer)"
            if saving["tokens"] == "tokenizer"
            else f"≈{saving['saving_tokens_total_estimate']} tokens (estimate, "
            f"{saving['bytes_per_token_estimate']} bytes/token)"
        )
        lines.append(
            f"  projected saving of a CORE-only prompt over {saving['requests']} requests: "
            f"{saving['saving_bytes_total']} schema bytes, {tokens}"
        )
        for row in saving["catalogs"][:5]:
            if not row["requests"]:
                continue
            observed = _fmt(row["observed_saving_bytes_mean"], ".0f")
            measured = (
                f", {row['saving_tokens_per_request']} tokens"
                if "saving_tokens_per_request" in row
                else ""
            )
            lines.append(
                f"    catalogue {row['catalog']}: {row['tools']} tools, {row['requests']} "
                f"requests, {row['full_bytes']} → {row['core_bytes']} bytes per request "
                f"({_fmt(row['saving_share'], '.0%')} saved{measured}; measured saving now "
                f"{observed} bytes)"
            )
    examples = report["examples"]
    lines.append("")
    if examples["toml"]:
        lines.append("suggested example utterances (policy file fragment):")
        lines.append(examples["toml"].rstrip("\n"))
    else:
        lines.append(
            "no example utterances stored (the proxy stores them only with "
            "TOOLPRUNE_USAGE_STORE_TEXT=true)"
        )
    lines.append("")
    lines.extend(format_learning(report.get("learning") or [], report.get("learning_shared")))
    return "\n".join(lines)


def format_learning(
    catalogs: Sequence[Mapping[str, Any]], shared: Mapping[str, Any] | None = None
) -> list[str]:
    """The report's learned-selection lines (:func:`proxy.usage.learning.summarise`), and
    what Redis holds when ``shared`` (:func:`proxy.usage.learning_share.shared_report`)."""
    lines = _format_promotions(catalogs)
    if shared is None:
        return lines
    if "error" in shared:
        return [*lines, f"  shared through Redis at {shared['endpoint']}: {shared['error']}"]
    versions: Mapping[str, int] = shared["versions"]
    promoted_here = {row["catalog"]: (row.get("in_use") or {}).get("version") for row in catalogs}
    lines.append(f"  shared through Redis at {shared['endpoint']}: "
                 + (", ".join(
                     f"{catalog[:12]} v{version}"
                     + ("" if promoted_here.get(catalog) == version else
                        " (another replica's)")
                     for catalog, version in sorted(versions.items()))
                    or "nothing"))
    return lines


def _format_promotions(catalogs: Sequence[Mapping[str, Any]]) -> list[str]:
    if not catalogs:
        return ["nothing learned (learning needs TOOLPRUNE_LEARN=true, then `toolprune learn` "
                "or TOOLPRUNE_LEARN_INTERVAL_S)"]
    lines = ["learned selection (recall@k of held-back requests, unlearned or previous "
             "state → learned):"]
    for row in catalogs:
        in_use = row.get("in_use")
        last = row["last"]
        head = f"  catalogue {row['catalog'][:12]}: "
        if in_use:
            head += (f"v{in_use['version']} in use, {in_use['learned_tools']} tools learned from "
                     f"{in_use['pairs']} calls of {in_use['requests']} requests, "
                     f"{in_use['before']:.3f} → {in_use['after']:.3f} at k={in_use['k']}, "
                     f"gain {in_use.get('gain', 1.0):g}, centering {in_use.get('centering', 0.0):g}")
        else:
            head += "no state in use"
        lines.append(head)
        if last is not in_use and last is not None:
            lines.append(f"    last attempt: {last['reason']}"
                         + (f" ({last['before']:.3f} → {last['after']:.3f})"
                            if last["reason"] == "not_better" else ""))
    return lines
