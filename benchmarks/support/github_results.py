"""Results of the long session's GitHub calls (``benchmarks.support.long_task``): sized
like the real server's answers for the repository :data:`REPOSITORY` (a pull request's
diff with its patches, a failed run's job logs, commit lists, review threads), generated
from word lists with a generator seeded by the call, so each call gets the same text on
every run. Nothing here is copied from a real repository.

The first line of every result is a one-line summary: what a scripted final answer quotes
(``Task.quote_lines``) and a run's "task done" looks for.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

OWNER, REPO = "acme", "ledger"
REPOSITORY = f"{OWNER}/{REPO}"
PEOPLE = ("dana-k", "rui-m", "ola-s", "tomasz-w", "mei-l", "ines-p", "kofi-a", "lena-v")
AREAS = ("reconcile", "exports", "ledgers", "currency", "importers", "audit", "api", "cli")
MODULES = ("matcher", "rounding", "csv_writer", "rates", "journal", "batch", "schema",
           "accounts", "periods", "fixtures", "ofx_reader", "retry")
VERBS = ("Fix", "Add", "Speed up", "Refactor", "Document", "Handle", "Drop", "Guard")
OBJECTS = ("half-even rounding in CSV exports", "duplicate journal lines on re-import",
           "currency rate caching", "period close for leap years", "OFX statements without "
           "a balance", "audit trail pagination", "the batch retry back-off",
           "negative amounts in the matcher", "schema migration 42", "locale-aware number "
           "parsing", "stale fixtures in the API tests", "timezone of posting dates")
NOUNS = ("amount", "entry", "rate", "period", "account", "batch", "line", "total", "row",
         "journal", "balance", "currency")
REMARKS = ("This keeps the totals stable when a batch is imported twice.",
           "Could we cover the zero-amount case with a test?",
           "The rounding mode should come from the ledger's settings, not a constant.",
           "Nit: the helper name says what it returns, not how it works.",
           "I ran the export on last month's data and the totals now match the bank.",
           "Please split the migration from the behaviour change.",
           "The retry loop needs an upper bound on its sleep.",
           "Looks right to me once the fixtures are regenerated.")


def _rng(tool: str, arguments: dict[str, Any]) -> random.Random:
    return random.Random(f"{tool}:{json.dumps(arguments, sort_keys=True)}")


def _path(rng: random.Random) -> str:
    return f"ledger/{rng.choice(AREAS)}/{rng.choice(MODULES)}.py"


def _day(rng: random.Random) -> str:
    return f"2026-11-{rng.randint(1, 28):02d}T{rng.randint(7, 19):02d}:{rng.randint(0, 59):02d}Z"


def _sha(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(40))


def _code(rng: random.Random) -> str:
    a, b = rng.sample(NOUNS, 2)
    forms = (f"    {a}_{b} = normalise_{a}({b}, mode=settings.rounding)",
             f"    if {a}.{b} is None:\n        raise LedgerError(\"{a} without {b}\")",
             f"    return sum(({a}.{b} for {a} in {a}s), start=Decimal(0))",
             f"def {a}_{b}({a}: {a.title()}, {b}: {b.title()}) -> Decimal:",
             f"    for {a} in batch.{b}s:\n        totals[{a}.account] += {a}.{b}",
             f"    log.debug(\"{a} %s {b} %s\", {a}.id, {b})",
             f"    {a} = {a}.quantize(Decimal(\"0.01\"), rounding=ROUND_HALF_EVEN)")
    return rng.choice(forms)


def list_pull_requests(rng: random.Random, arguments: dict[str, Any]) -> str:
    count = 56
    lines = [f"{REPOSITORY}: {count} open pull requests, newest first"]
    for index in range(count):
        number = 318 if index == 3 else 340 - index
        title = ("Fix half-even rounding in CSV exports" if number == 318
                 else f"{rng.choice(VERBS)} {rng.choice(OBJECTS)}")
        lines.append(f"#{number} {title} | author {rng.choice(PEOPLE)} | "
                     f"{rng.choice(AREAS)}/{rng.choice(MODULES)} -> main | updated {_day(rng)} | "
                     f"{rng.randint(1, 14)} files +{rng.randint(3, 420)} -{rng.randint(0, 180)}")
        lines.append(f"    {rng.choice(REMARKS)}")
    return "\n".join(lines)


def _hunk(rng: random.Random, start: int) -> list[str]:
    lines = [f"@@ -{start},{18} +{start},{21} @@ def {rng.choice(NOUNS)}_{rng.choice(NOUNS)}():"]
    for _ in range(16):
        mark = rng.choices((" ", "+", "-"), weights=(6, 3, 2))[0]
        lines += [mark + line for line in _code(rng).splitlines()]
    return lines


def pull_request_diff(rng: random.Random, arguments: dict[str, Any]) -> str:
    files = sorted({_path(rng) for _ in range(9)})
    lines = [f"{REPOSITORY}#{arguments.get('pullNumber')} diff: {len(files)} files changed"]
    for path in files:
        lines += [f"diff --git a/{path} b/{path}", f"--- a/{path}", f"+++ b/{path}"]
        for start in sorted(rng.sample(range(10, 400), 2)):
            lines += _hunk(rng, start)
    return "\n".join(lines)


def reviews(rng: random.Random, arguments: dict[str, Any]) -> str:
    number = arguments.get("pullNumber")
    if arguments.get("method") == "get_reviews":
        lines = [f"{REPOSITORY}#{number}: 5 reviews"]
        for index in range(5):
            state = rng.choice(("COMMENTED", "CHANGES_REQUESTED", "APPROVED"))
            lines.append(f"review {9000 + index} by {rng.choice(PEOPLE)} ({state}, {_day(rng)}): "
                         + " ".join(rng.sample(REMARKS, 3)))
        return "\n".join(lines)
    lines = [f"{REPOSITORY}#{number}: 38 review comments in 14 threads"]
    for index in range(38):
        lines.append(f"comment {71000 + index} by {rng.choice(PEOPLE)} on {_path(rng)} line "
                     f"{rng.randint(5, 390)} ({_day(rng)}): {' '.join(rng.sample(REMARKS, 2))}")
        lines.append(f"    > {_code(rng).strip().splitlines()[0]}")
    return "\n".join(lines)


def _issue_line(rng: random.Random, number: int) -> str:
    return (f"#{number} {rng.choice(VERBS)} {rng.choice(OBJECTS)} | open | labels "
            f"{', '.join(rng.sample(('bug', 'exports', 'regression', 'needs-triage', 'api'), 2))}"
            f" | {rng.randint(0, 14)} comments | opened by {rng.choice(PEOPLE)} {_day(rng)}")


def search_issues(rng: random.Random, arguments: dict[str, Any]) -> str:
    lines = [f"44 issues match {arguments.get('query')}"]
    for index in range(44):
        lines.append(_issue_line(rng, 291 if index == 0 else 300 - index * 3))
        lines.append(f"    {rng.choice(REMARKS)} {rng.choice(REMARKS)}")
    return "\n".join(lines)


def issue(rng: random.Random, arguments: dict[str, Any]) -> str:
    number = arguments.get("issue_number")
    if arguments.get("method") == "get_comments":
        lines = [f"{REPOSITORY}#{number}: 36 comments"]
        for index in range(36):
            lines.append(f"comment {55000 + index} by {rng.choice(PEOPLE)} ({_day(rng)}):")
            lines += [f"    {remark}" for remark in rng.sample(REMARKS, 3)]
        return "\n".join(lines)
    body = [f"    {rng.choice(REMARKS)}" for _ in range(10)]
    steps = [f"    {n}. export the {rng.choice(NOUNS)} report for period 2026-{n:02d}"
             for n in range(1, 7)]
    return "\n".join([f"{REPOSITORY}#{number}: CSV export rounds 0.125 to 0.13 on some rows",
                      _issue_line(rng, int(number or 0)), "Description:", *body,
                      "Steps to reproduce:", *steps])


def workflow_runs(rng: random.Random, arguments: dict[str, Any]) -> str:
    lines = [f"{REPOSITORY}: 60 workflow runs on main"]
    for index in range(60):
        run = 7781 if index == 2 else 7800 - index * 4
        outcome = "failure" if run == 7781 else rng.choice(("success", "success", "failure"))
        lines.append(f"run {run} | {rng.choice(('ci', 'nightly-export', 'release-check'))} | "
                     f"{outcome} | commit {_sha(rng)[:7]} | {_day(rng)} | "
                     f"{rng.randint(3, 41)} min | triggered by {rng.choice(PEOPLE)}")
    return "\n".join(lines)


def job_logs(rng: random.Random, arguments: dict[str, Any]) -> str:
    run = arguments.get("run_id")
    lines = [f"run {run}: 2 failed jobs, logs of test-exports and test-reconcile"]
    for job in ("test-exports", "test-reconcile"):
        lines.append(f"=== job {job} (failure) ===")
        for second in range(110):
            stamp = f"2026-11-19T10:{second // 60 + 12:02d}:{second % 60:02d}.{rng.randint(0, 999):03d}Z"
            test = f"tests/{rng.choice(AREAS)}/test_{rng.choice(MODULES)}.py::test_{rng.choice(NOUNS)}"
            if second % 37 == 36:
                lines.append(f"{stamp} FAILED {test} - AssertionError: Decimal('0.13') != "
                             f"Decimal('0.12')")
            else:
                lines.append(f"{stamp} PASSED {test} [{second * 100 // 110:3d}%]")
    return "\n".join(lines)


def branches(rng: random.Random, arguments: dict[str, Any]) -> str:
    names = sorted({f"{rng.choice(PEOPLE)}/{rng.choice(MODULES)}-{rng.randint(1, 99)}"
                    for _ in range(26)})
    return "\n".join([f"{REPOSITORY}: {len(names) + 2} branches", "main (protected)",
                      "release/2.7 (protected)",
                      *(f"{name} | head {_sha(rng)[:7]}" for name in names)])


def commits(rng: random.Random, arguments: dict[str, Any]) -> str:
    lines = [f"{REPOSITORY}: last 60 commits on {arguments.get('sha') or 'main'}"]
    for index in range(60):
        sha = "a41c9e2" + _sha(rng)[7:] if index == 1 else _sha(rng)
        lines.append(f"{sha} | {rng.choice(PEOPLE)} | {_day(rng)} | "
                     f"{rng.choice(VERBS)} {rng.choice(OBJECTS)} (#{rng.randint(200, 340)})")
    return "\n".join(lines)


def commit(rng: random.Random, arguments: dict[str, Any]) -> str:
    files = sorted({_path(rng) for _ in range(10)})
    lines = [f"commit {arguments.get('sha')}: Fix half-even rounding in CSV exports, "
             f"{len(files)} files", f"author {rng.choice(PEOPLE)} {_day(rng)}"]
    for path in files:
        lines += [f"--- a/{path}", f"+++ b/{path}", *_hunk(rng, rng.randint(10, 300))]
    return "\n".join(lines)


def releases(rng: random.Random, arguments: dict[str, Any]) -> str:
    lines = [f"{REPOSITORY}: 20 releases, newest first"]
    for number in range(27, 7, -1):  # 2.7.0 down to 0.8.0
        version = f"{number // 10}.{number % 10}.0"
        lines.append(f"v{version} | published {_day(rng)} by {rng.choice(PEOPLE)}")
        lines += [f"    - {rng.choice(VERBS)} {rng.choice(OBJECTS)}" for _ in range(7)]
    return "\n".join(lines)


def latest_release(rng: random.Random, arguments: dict[str, Any]) -> str:
    notes = [f"    - {rng.choice(VERBS)} {rng.choice(OBJECTS)} (#{rng.randint(200, 300)})"
             for _ in range(18)]
    return "\n".join([f"{REPOSITORY} latest release: v2.7.0", f"published {_day(rng)}",
                      "Notes:", *notes])


GENERATED: dict[tuple[str, str | None], Callable[[random.Random, dict[str, Any]], str]] = {
    ("list_pull_requests", None): list_pull_requests,
    ("pull_request_read", "get_diff"): pull_request_diff,
    ("pull_request_read", "get_reviews"): reviews,
    ("pull_request_read", "get_review_comments"): reviews,
    ("search_issues", None): search_issues,
    ("issue_read", "get"): issue,
    ("issue_read", "get_comments"): issue,
    ("actions_list", "list_workflow_runs"): workflow_runs,
    ("get_job_logs", None): job_logs,
    ("list_branches", None): branches,
    ("list_commits", None): commits,
    ("get_commit", None): commit,
    ("list_releases", None): releases,
    ("get_latest_release", None): latest_release,
}


def is_long_session(arguments: dict[str, Any]) -> bool:
    """Whether a call is about :data:`REPOSITORY` (its ``owner``/``repo``, or a query
    naming it)."""
    return ((arguments.get("owner"), arguments.get("repo")) == (OWNER, REPO)
            or REPOSITORY in str(arguments.get("query", "")))


def generated_result(tool: str, arguments: dict[str, Any]) -> str:
    """The text a call of ``tool`` with ``arguments`` about :data:`REPOSITORY` returns:
    generated where :data:`GENERATED` has the tool (and ``method``), else a one-line
    acknowledgement naming the call."""
    make = GENERATED.get((tool, arguments.get("method"))) or GENERATED.get((tool, None))
    if make is None:
        shown = ", ".join(f"{key}={value}" for key, value in sorted(arguments.items())
                          if key not in ("owner", "repo", "body"))
        return f"{tool} on {REPOSITORY}: done ({shown})"
    return make(_rng(tool, arguments), arguments)
