"""The seconds tables of ``benchmarks/agent_sessions.py --long`` and ``--simulate``: each
session's evaluated and generated tokens, requests and seconds on every hardware profile
(:mod:`benchmarks.support.hardware_profiles`); per profile, direct, the session oracle,
toolprune with the server's speed unknown and toolprune that learned the profile's speed
from ``timings``, against direct and the oracle (as run, and counted with the tools it
calls alone); each user turn's wait, median and longest, per profile. Arithmetic: :mod:`benchmarks.support.session_seconds`."""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.agent_session_runs import references
from benchmarks.long_session_runs import ORACLE, ORACLE_CALLED, LongResult, learned_via
from benchmarks.support.hardware_profiles import PROFILES, Profile
from benchmarks.support.session_seconds import session_seconds, total_of, turn_seconds
from benchmarks.support.text_tables import markdown_table, median, n, table

#: What the tables say of the server the run used: its prompts were not prefilled.
SERVER_IN_USE = ("the server in use: none measured (every request was counted by "
                 "llama-server's tokenizer and the simulation of its prompt cache, not "
                 "prefilled: no real timings)")


def _s(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


def _x(value: float | None, reference: float | None) -> str:
    return "–" if value is None or not reference else f"{value / reference:.2f}×"


def seconds(result: LongResult | None, profile: Profile) -> float | None:
    """The session's seconds on ``profile`` (None: no session, or unknown)."""
    return None if result is None else session_seconds(result.requests, profile)


def session_rows(results: Sequence[LongResult],
                 profiles: Sequence[Profile] = PROFILES) -> tuple[list[str], list[list[str]]]:
    """Per session: requests, evaluated and generated tokens, seconds per profile."""
    headers = ["client/mode", "via", "requests", "evaluated", "generated",
               *(f"s {profile.name}" for profile in profiles)]
    rows = [[result.mode, result.via, str(len(result.requests)),
             n(total_of(result.requests, "evaluated")), n(total_of(result.requests, "generated")),
             *(_s(seconds(result, profile)) for profile in profiles)] for result in results]
    return headers, rows


def _first_prompt(result: LongResult | None) -> int | None:
    first = result.first if result is not None else None
    return first["prompt"] if first else None


def profile_rows(results: Sequence[LongResult],
                 profiles: Sequence[Profile] = PROFILES) -> tuple[list[str], list[list[str]]]:
    """Per mode and profile: direct's, the oracle's (and its called-only count's),
    toolprune's (speed unknown) and the learned via's seconds, the last two against
    direct and both oracles, and the first request's prompt tokens against direct's."""
    headers = ["client/mode", "profile", "direct s", "oracle s", "oracle × direct",
               "called-only s", "toolprune s", "toolprune × direct", "toolprune × oracle",
               "toolprune × called-only", "learned s", "learned × direct", "learned × oracle",
               "learned × called-only", "first prompt × direct", "learned first × direct"]
    base = references(list(results))
    rows = []
    for mode in dict.fromkeys(result.mode for result in results):
        found = {result.via: result for result in results if result.mode == mode}
        direct = base.get(mode)
        first = _first_prompt(direct)
        for profile in profiles:
            d, o = seconds(direct, profile), seconds(found.get(ORACLE), profile)
            c = seconds(found.get(ORACLE_CALLED), profile)
            t = seconds(found.get("toolprune"), profile)
            learned = found.get(learned_via(profile))
            lt = seconds(learned, profile)
            rows.append([mode, profile.name, _s(d), _s(o), _x(o, d), _s(c),
                         _s(t), _x(t, d), _x(t, o), _x(t, c),
                         _s(lt), _x(lt, d), _x(lt, o), _x(lt, c),
                         _x(_first_prompt(found.get("toolprune")), first),
                         _x(_first_prompt(learned), first)])
    return headers, rows


def wait_rows(results: Sequence[LongResult],
              profiles: Sequence[Profile] = PROFILES) -> tuple[list[str], list[list[str]]]:
    """Per session and profile: the median and the longest user-turn wait, and the
    median turn's seconds (``wait median / max · turn median``)."""
    headers = ["client/mode", "via", *(f"{profile.name}: wait med / max · turn med"
                                       for profile in profiles)]
    rows = []
    for result in results:
        cells = []
        for profile in profiles:
            turns = turn_seconds(result.requests, profile)
            waits = [turn.wait_s for turn in turns]
            longest = None if not waits or None in waits else max(waits)  # type: ignore[type-var]
            cells.append(f"{_s(median(waits))} / {_s(longest)} · "
                         f"{_s(median([turn.total_s for turn in turns]))}")
        rows.append([result.mode, result.via, *cells])
    return headers, rows


def render(results: Sequence[LongResult], markdown: bool = False) -> str:
    """The three tables, plain or Markdown, and what the server in use measured."""
    parts = []
    for headers, rows in (session_rows(results), profile_rows(results), wait_rows(results)):
        parts.append((markdown_table if markdown else table)(headers, rows, left=2))
    return "\n\n".join([*parts, SERVER_IN_USE])
