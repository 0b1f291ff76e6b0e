"""The long session of ``benchmarks.agent_sessions --long``: one conversation of 16 user
turns on the repository ``acme/ledger`` whose needs move across the GitHub catalogue:
pull requests, then their reviews, issues, CI runs and their logs, branches and commits,
releases, and back to the pull request to merge it. 22 calls; the results of the reading
calls are sized like the real server's (:mod:`benchmarks.support.github_results`: a diff
with its patches, job logs, commit lists), so the history passes 40k tokens by the end.

Each turn's final answer quotes the first line of each of its results
(``Task.quote_lines``), as an agent summarises what it read.
"""

from __future__ import annotations

from typing import Any

from benchmarks.support.agent_behaviour import Step, Task, UserTurn
from benchmarks.support.github_results import OWNER, REPO, REPOSITORY

HERE = {"owner": OWNER, "repo": REPO}


def _step(tool: str, keywords: str, **arguments: Any) -> Step:
    return Step(tool, {**HERE, **arguments}, keywords)


def _turn(prompt: str, *steps: Step) -> UserTurn:
    return UserTurn(prompt, steps, "Here is what I found:")


LONG_SESSION = Task(quote_lines=1, turns=(
    _turn(f"Which pull requests are open in {REPOSITORY} right now?",
          _step("list_pull_requests", "list pull requests", state="open")),
    _turn("Show me the full diff of pull request 318.",
          _step("pull_request_read", "information on a specific pull request",
                method="get_diff", pullNumber=318)),
    _turn("What have the reviewers said on 318 so far? Include their inline comments.",
          _step("pull_request_read", "pull request reviews", method="get_reviews",
                pullNumber=318),
          _step("pull_request_read", "pull request review comments",
                method="get_review_comments", pullNumber=318)),
    _turn("Leave a comment review on 318 asking for a test of the rounding change, then "
          "ask dana-k to review it too.",
          _step("pull_request_review_write", "write pull request review", method="create",
                pullNumber=318, event="COMMENT",
                body="Please add a test that exports 0.125 and checks it rounds to 0.12."),
          _step("request_pull_request_reviewers", "request reviewers", pullNumber=318,
                reviewers=["dana-k"])),
    _turn(f"Are there open issues in {REPOSITORY} about rounding in CSV exports?",
          Step("search_issues", {"query": f"repo:{REPOSITORY} is:issue is:open rounding csv"},
               "search issues")),
    _turn("Read issue 291 and everything people wrote under it.",
          _step("issue_read", "information about a specific issue", method="get",
                issue_number=291),
          _step("issue_read", "issue comments", method="get_comments", issue_number=291)),
    _turn("Label 291 as a bug and a regression, and note on it that pull request 318 "
          "should fix it.",
          _step("update_issue_labels", "issue labels", issue_number=291,
                labels=["bug", "regression"]),
          _step("add_issue_comment", "add a comment to an issue", issue_number=291,
                body="Pull request 318 changes the export to half-even rounding; it should "
                     "fix this.")),
    _turn("How did the CI runs on main go this week?",
          _step("actions_list", "list workflow runs", method="list_workflow_runs")),
    _turn("Run 7781 failed: show me the logs of its failing jobs.",
          _step("get_job_logs", "job logs", run_id=7781, failed_only=True,
                return_content=True)),
    _turn("Re-run the failed jobs of run 7781.",
          _step("actions_run_trigger", "re-run workflow run", method="rerun_failed_jobs",
                run_id=7781)),
    _turn("Which branches are there, and what landed on main recently?",
          _step("list_branches", "list branches"),
          _step("list_commits", "list commits", sha="main")),
    _turn("Show me commit a41c9e2 in detail.",
          _step("get_commit", "get commit", sha="a41c9e2", detail="full_patch")),
    _turn("Create a branch release/2.8 from main.",
          _step("create_branch", "create branch", branch="release/2.8", from_branch="main")),
    _turn("List the releases so far, and tell me what the latest one shipped.",
          _step("list_releases", "list releases"),
          _step("get_latest_release", "latest release")),
    _turn("Open an issue titled 'Release notes for 2.8' with a draft of the notes.",
          _step("create_issue", "create issue", title="Release notes for 2.8",
                body="Draft: half-even rounding in CSV exports (#318); job log retries.")),
    _turn("Finally, squash-merge pull request 318.",
          _step("merge_pull_request", "merge pull request", pullNumber=318,
                merge_method="squash")),
))


def checkpoints(turns: int) -> list[int]:
    """The user turns (1-based) after which the session is reported: a quarter, a half,
    three quarters and the end of ``turns``, each once."""
    marks = [max(1, round(turns * share)) for share in (0.25, 0.5, 0.75)] + [turns]
    return list(dict.fromkeys(marks))  # a short session has fewer distinct marks
