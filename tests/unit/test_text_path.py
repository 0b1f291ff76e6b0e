"""The text path's pure parts (issue #6): finding a tool block in a system prompt,
splitting it into entries, rewriting it, and recognising text tool calls.

Prompts come from :mod:`tests.support.agent_prompts` (realistic agents, 30+ tools).
"""

from __future__ import annotations

import json
import re
import threading
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

import pytest

from config.policy import load_policy
from config.settings import Settings
from selection.catalog import text_plan
from selection.catalog.text_path import (
    PRESETS,
    TextFormat,
    ToolBlock,
    custom_format,
    detect,
    find_blocks,
    others_line,
    text_called_tools,
)
from selection.catalog.text_plan import SEARCH_IN_THREAD_CHARS, find_text_plan, search_text_plan
from selection.errors import PolicyError
from tests.support import agent_prompts as prompts

PLAYWRIGHT = prompts.load_catalog("playwright_mcp")
GITHUB = prompts.load_catalog("github_mcp_server")
HERMES_TOOLS = PLAYWRIGHT[:40]
LINES_TOOLS = GITHUB[:45]
MIN_ENTRIES = 9  # the proxy's threshold with default settings: min_catalog_tools (8) + 1
OTHERS_PREFIX = others_line(["x"]).split("x")[0]


def preset_prompt(preset: str) -> tuple[str, list[str]]:
    """A realistic prompt for ``preset`` and its tool names, in block order."""
    if preset == "hermes":
        return prompts.hermes_prompt(HERMES_TOOLS), [prompts.tool_name(t) for t in HERMES_TOOLS]
    if preset == "markdown":
        return prompts.coding_agent_prompt(), prompts.coding_tool_names()
    if preset == "lines-dash":
        return prompts.lines_prompt(LINES_TOOLS, "dash"), [prompts.tool_name(t) for t in LINES_TOOLS]
    if preset == "lines-call":
        return prompts.lines_prompt(LINES_TOOLS, "call"), [prompts.tool_name(t) for t in LINES_TOOLS]
    raise ValueError(preset)


PRESET_CASES = ["hermes", "markdown", "lines-dash", "lines-call"]


def detected(text: str) -> ToolBlock | None:
    return detect(text, PRESETS, MIN_ENTRIES)


def entry_texts(text: str, block: ToolBlock) -> dict[str, str]:
    return {entry.name: text[entry.start : entry.end] for entry in block.entries}


def others_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(OTHERS_PREFIX)]


def named_in_others(line: str) -> list[str]:
    return line[len(OTHERS_PREFIX) :].rstrip(".").split(", ")


# --- detection of the presets ----------------------------------------------------------


@pytest.mark.parametrize("preset", PRESET_CASES)
def test_each_preset_is_detected_with_every_tool_as_an_entry(preset: str) -> None:
    text, names = preset_prompt(preset)
    assert len(names) >= 30
    block = detected(text)
    assert block is not None
    assert block.format == preset.split("-")[0]
    assert [entry.name for entry in block.entries] == names
    # Entries tile the block: contiguous, in order, inside the block's span.
    assert block.start <= block.entries[0].start
    for before, after in zip(block.entries, block.entries[1:], strict=False):
        assert before.end == after.start
    assert block.entries[-1].end <= block.end


def test_hermes_entries_are_the_schema_lines() -> None:
    text, _ = preset_prompt("hermes")
    block = detected(text)
    assert block is not None
    for tool, entry in zip(HERMES_TOOLS, block.entries, strict=True):
        assert json.loads(text[entry.start : entry.end]) == tool
    assert text[block.end :].startswith("</tools>")
    catalog = block.catalog(text)
    click = catalog.get("browser_click")
    assert click is not None
    assert click.description == HERMES_TOOLS[0]["function"]["description"]
    assert click.parameters == HERMES_TOOLS[0]["function"]["parameters"]


def test_markdown_entries_are_whole_sections_and_stop_at_the_next_top_heading() -> None:
    text, _names = preset_prompt("markdown")
    block = detected(text)
    assert block is not None
    sections = entry_texts(text, block)
    for name, description, params in prompts.CODING_TOOLS:
        assert sections[name] == prompts.coding_tool_section(name, description, params)
    assert text[block.entries[-1].end :].startswith("# Examples\n")
    assert "Example 1" not in text[block.start : block.end]


def test_markdown_with_fenced_usage_examples_is_detected() -> None:
    text = prompts.coding_agent_prompt(fenced_usage=True)
    block = detected(text)
    assert block is not None and block.format == "markdown"
    assert [e.name for e in block.entries] == prompts.coding_tool_names()
    assert "```xml\n<read_file>" in entry_texts(text, block)["read_file"]


@pytest.mark.parametrize("preset", ["lines-dash", "lines-call"])
def test_lines_entries_are_the_tool_lines_and_stop_at_the_prose(preset: str) -> None:
    text, _ = preset_prompt(preset)
    block = detected(text)
    assert block is not None
    style = preset.split("-")[1]
    for tool, entry in zip(LINES_TOOLS, block.entries, strict=True):
        assert text[entry.start : entry.end].strip() == prompts.lines_entry(tool, style)
    assert text[block.end :].lstrip("\n").startswith("Answer in the user's language.")


# --- rewriting ---------------------------------------------------------------------


def every_third(names: list[str]) -> list[str]:
    return names[::3]


@pytest.mark.parametrize("preset", PRESET_CASES)
def test_rewrite_keeps_entries_byte_identical_in_order_and_adds_one_others_line(preset: str) -> None:
    text, names = preset_prompt(preset)
    block = detected(text)
    assert block is not None
    sections = entry_texts(text, block)
    keep = every_third(names)
    dropped = [name for name in names if name not in keep]
    # keep is a set to the rewrite: hand it over reversed, with an unknown name.
    rewritten = block.rewrite(text, [*reversed(keep), "not_a_tool"])

    first, last = block.entries[0], block.entries[-1]
    kept_text = "".join(sections[name] for name in keep)
    separator = "" if kept_text.endswith("\n") else "\n"
    expected = text[: first.start] + kept_text + separator + others_line(dropped) + "\n" + text[last.end :]
    assert rewritten == expected
    assert len(rewritten) < len(text)
    # Everything outside the block is untouched, kept entries appear verbatim in order.
    assert rewritten.startswith(text[: first.start])
    assert rewritten.endswith(text[last.end :])
    positions = [rewritten.index(sections[name]) for name in keep]
    assert positions == sorted(positions)
    for name in dropped:
        assert sections[name] not in rewritten
    [line] = others_lines(rewritten)
    assert named_in_others(line) == dropped


@pytest.mark.parametrize("preset", PRESET_CASES)
def test_others_line_is_unchanged_while_the_dropped_set_is_the_same(preset: str) -> None:
    text, names = preset_prompt(preset)
    block = detected(text)
    assert block is not None
    keep = names[1:30:4]
    first = block.rewrite(text, keep)
    second = block.rewrite(text, list(reversed(keep)))  # another turn, same set
    third = block.rewrite(text, {*keep, "load_tools", "unknown"})  # extra names are ignored
    assert first == second == third
    [line] = others_lines(first)
    # A different dropped set gives a different line.
    [other] = others_lines(block.rewrite(text, [*keep, names[0]]))
    assert other != line and names[0] not in named_in_others(other)
    assert others_line(["b", "a"]) == others_line(["b", "a"]) != others_line(["a", "b"])


@pytest.mark.parametrize("preset", PRESET_CASES)
def test_rewrite_keeping_everything_is_the_identity(preset: str) -> None:
    text, names = preset_prompt(preset)
    block = detected(text)
    assert block is not None
    assert block.rewrite(text, names) == text


def test_hermes_rewrite_keeps_the_others_line_inside_the_tools_tags() -> None:
    text, names = preset_prompt("hermes")
    block = detected(text)
    assert block is not None
    rewritten = block.rewrite(text, names[:5])
    inside = rewritten.split("<tools>\n", 1)[1].split("</tools>", 1)[0].splitlines()
    assert inside[:5] == prompts.hermes_lines(HERMES_TOOLS[:5])
    assert inside[5:] == [others_line(names[5:])]


# --- what is not a tool block ------------------------------------------------------


def test_bulleted_guidelines_are_not_a_tool_block() -> None:
    text = prompts.guidelines_prompt()
    # The lines pattern does see 14 "- Label: text" entries; detection must reject them.
    block = next(find_blocks(text, next(f for f in PRESETS if f.name == "lines")), None)
    assert block is not None and len(block.entries) >= MIN_ENTRIES
    assert detected(text) is None
    assert detect(text, PRESETS, 1) is None


def test_markdown_document_with_ordinary_headings_is_not_a_tool_block() -> None:
    text = prompts.markdown_document_prompt()
    block = next(find_blocks(text, next(f for f in PRESETS if f.name == "markdown")), None)
    assert block is not None and "Installation" in [e.name for e in block.entries]
    assert len(block.entries) >= MIN_ENTRIES
    assert detected(text) is None
    assert detect(text, PRESETS, 1) is None


def unfenced(text: str) -> str:
    return re.sub(r"^```[^\n]*\n", "", text, flags=re.MULTILINE)


@pytest.mark.parametrize("kind", ["lines", "signatures", "markdown"])
def test_tool_looking_text_in_a_fenced_code_block_is_not_a_tool_block(kind: str) -> None:
    text = prompts.fenced_examples_prompt(kind)
    assert detected(unfenced(text)) is not None  # the same text outside a fence would be
    assert detected(text) is None


def test_hermes_block_in_a_fenced_code_block_is_not_a_tool_block() -> None:
    text = prompts.fenced_examples_prompt("hermes")
    assert detected(unfenced(text)) is not None
    assert detected(text) is None


@pytest.mark.parametrize(
    "corrupt",
    [
        pytest.param(lambda line: line + ",", id="trailing-comma"),
        pytest.param(lambda line: line[: len(line) // 2], id="truncated"),
        pytest.param(lambda line: line.replace('{"type"', "{'type'", 1), id="single-quotes"),
        pytest.param(lambda line: "// browser tools\n" + line, id="comment-line"),
        pytest.param(lambda line: line + "\n[1, 2]", id="json-not-an-object"),
    ],
)
def test_malformed_hermes_block_is_not_detected(corrupt) -> None:  # type: ignore[no-untyped-def]
    lines = prompts.hermes_lines(HERMES_TOOLS)
    good = prompts.hermes_prompt(HERMES_TOOLS)
    bad = good.replace(lines[17], corrupt(lines[17]), 1)
    assert bad != good
    hermes = next(f for f in PRESETS if f.name == "hermes")
    assert list(find_blocks(bad, hermes)) == []
    assert detected(bad) is None
    messages = [{"role": "system", "content": bad}, {"role": "user", "content": "hi"}]
    assert find_text_plan(messages, PRESETS, MIN_ENTRIES) is None


def test_repeated_names_make_a_block_invalid() -> None:
    text, _names = preset_prompt("lines-dash")
    line = prompts.lines_entry(LINES_TOOLS[3], "dash")
    assert detected(text.replace(line, line + "\n" + line, 1)) is None


def test_too_few_entries_are_not_a_block() -> None:
    text = prompts.hermes_prompt(HERMES_TOOLS[:MIN_ENTRIES - 1])
    assert detected(text) is None
    assert detect(text, PRESETS, MIN_ENTRIES - 1) is not None


def test_hermes_prompt_that_names_the_tags_inline_is_detected() -> None:
    text = prompts.hermes_prompt(HERMES_TOOLS, inline_tag_mention=True)
    block = detected(text)
    assert block is not None and len(block.entries) == len(HERMES_TOOLS)


@pytest.mark.parametrize("fmt", PRESETS, ids=lambda f: f.name)
def test_no_entry_starts_on_a_blank_line(fmt) -> None:  # type: ignore[no-untyped-def]
    """An entry starts on its own line: were a blank line allowed to start one (``^\\s*``
    spans newlines), the search would restart at every blank line and rescan the ones
    after it, quadratic in a block's blank lines (48 KB of them held the proxy's event
    loop, every client with it, for 10 s). Blank lines between entries belong to the
    entry before them."""
    lines = prompts.hermes_lines(HERMES_TOOLS) if fmt.name == "hermes" else [
        f"- {prompts.tool_name(t)}: does one thing" for t in LINES_TOOLS
    ]
    if fmt.name == "markdown":
        lines = [f"## {prompts.tool_name(t)}\nDescription: does one thing" for t in LINES_TOOLS]
    text = "<tools>\n\n \n" + "\n\n".join(lines) + "\n</tools>\n"
    starts = [m.start() for m in fmt.entry.finditer(text)]
    assert len(starts) == len(lines)
    for start in starts:
        line_end = text.find("\n", start)
        assert text[start:line_end].strip(), f"an entry of {fmt.name} starts on a blank line"


def test_detecting_copies_no_text_per_block() -> None:
    """Each block that ends at a stop line used to copy the rest of the text (a slice, to
    look for a newline): quadratic in a prompt of many small blocks, on the event loop
    (a 2.4 MB system prompt of 160,000 of them: about a minute). Memory is the clock-free
    witness: beyond the text itself detection needs a few small objects at a time."""
    text = "- ab_c: x\nstop\n" * 20_000
    tracemalloc.start()
    try:
        detect(text, PRESETS, MIN_ENTRIES)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(text) // 10, f"detection held {peak} bytes for a {len(text)}-byte text"


def test_markdown_tools_after_an_earlier_level_two_section_are_detected() -> None:
    text = prompts.coding_agent_prompt(intro_subsection=True)
    block = detected(text)
    assert block is not None and [e.name for e in block.entries] == prompts.coding_tool_names()


def test_guideline_bullets_after_a_lines_tool_list_are_not_entries() -> None:
    text = prompts.lines_prompt(LINES_TOOLS, guidelines_after=True)
    block = detected(text)
    assert block is not None
    names = [e.name for e in block.entries]
    assert "Safety" not in names
    rewritten = block.rewrite(text, names[:5])
    assert "- Safety: never submit a form" in rewritten


def test_markdown_prompt_with_crlf_line_endings_is_detected() -> None:
    for preset in ("hermes", "lines-dash"):
        text, names = preset_prompt(preset)
        crlf = detected(text.replace("\n", "\r\n"))
        assert crlf is not None and [e.name for e in crlf.entries] == names
    text, names = preset_prompt("markdown")
    block = detected(text.replace("\n", "\r\n"))
    assert block is not None and [e.name for e in block.entries] == names


# --- custom formats from the policy file -----------------------------------------


POLICY_TOML = r'''
min_catalog_tools = 8

[[text_formats]]
name = "my-agent"
start = "<available_tools>"
end = "</available_tools>"
entry = '^tool (?P<name>[\w-]+):'
'''


def custom_prompt(count: int = 12) -> tuple[str, list[str]]:
    names = [prompts.tool_name(t) for t in GITHUB[40 : 40 + count]]
    entries = "".join(f"tool {name}: does {name.replace('_', ' ')}\n  (GitHub)\n" for name in names)
    return (
        "You are an ops bot.\n<available_tools>\n" + entries + "</available_tools>\nBe brief.\n",
        names,
    )


def write_policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


def test_custom_format_from_the_policy_file_is_tried_first(tmp_path: Path) -> None:
    policy = load_policy(Settings(policy_file=write_policy(tmp_path, POLICY_TOML)))
    assert [f.name for f in policy.text_formats] == ["my-agent", "hermes", "markdown", "lines"]
    text, names = custom_prompt()
    block = detect(text, policy.text_formats, MIN_ENTRIES)
    assert block is not None and block.format == "my-agent"
    assert [e.name for e in block.entries] == names
    assert text[block.entries[0].start :].startswith(f"tool {names[0]}:")
    rewritten = block.rewrite(text, names[:3])
    assert rewritten == (
        "You are an ops bot.\n<available_tools>\n"
        + "".join(f"tool {n}: does {n.replace('_', ' ')}\n  (GitHub)\n" for n in names[:3])
        + others_line(names[3:])
        + "\n</available_tools>\nBe brief.\n"
    )
    assert detect(text, PRESETS, MIN_ENTRIES) is None  # the presets do not know it


def test_text_format_setting_forces_one_format_or_turns_the_path_off(tmp_path: Path) -> None:
    path = write_policy(tmp_path, POLICY_TOML)
    forced = load_policy(Settings(policy_file=path, text_format="my-agent"))
    assert [f.name for f in forced.text_formats] == ["my-agent"]
    assert [f.name for f in load_policy(Settings(text_format="markdown")).text_formats] == ["markdown"]
    assert load_policy(Settings(policy_file=path, text_format="off")).text_formats == ()
    text, _ = preset_prompt("hermes")
    assert detect(text, load_policy(Settings(text_format="lines")).text_formats, MIN_ENTRIES) is None
    with pytest.raises(PolicyError):
        load_policy(Settings(text_format="no-such-format"))


def test_custom_format_without_a_name_group_is_a_policy_error(tmp_path: Path) -> None:
    toml = "[[text_formats]]\nname = \"x\"\nentry = '^tool ([\\w-]+):'\n"
    with pytest.raises(PolicyError, match="name"):
        load_policy(Settings(policy_file=write_policy(tmp_path, toml)))
    with pytest.raises(ValueError, match="name"):
        custom_format("x", r"^tool ([\w-]+):", None, None)


@pytest.mark.parametrize(
    "table",
    [
        pytest.param("entry = '^tool (?P<name>[\\w-+):'", id="entry"),
        pytest.param("entry = '^tool (?P<name>\\w+):'\nstart = '<tools('", id="start"),
    ],
)
def test_invalid_regex_in_a_custom_format_is_a_policy_error(tmp_path: Path, table: str) -> None:
    toml = f"[[text_formats]]\nname = \"x\"\n{table}\n"
    with pytest.raises(PolicyError):
        load_policy(Settings(policy_file=write_policy(tmp_path, toml)))


# --- the plan over messages ------------------------------------------------------------


def test_find_text_plan_reads_system_and_developer_messages_and_content_parts() -> None:
    text, names = preset_prompt("markdown")
    user = {"role": "user", "content": "Fix the failing test in tests/api/users.test.ts"}
    plain = find_text_plan([{"role": "system", "content": text}, user], PRESETS, MIN_ENTRIES)
    assert plain is not None and plain.message == 0 and plain.part is None
    parts = [
        {"role": "user", "content": "hello"},
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": text}]},
        user,
    ]
    plan = find_text_plan(parts, PRESETS, MIN_ENTRIES)
    assert plan is not None and (plan.message, plan.part) == (1, 1)
    rewritten = plan.rewrite_messages(parts, set(names[:4]))
    assert rewritten[0] == parts[0] and rewritten[2] == parts[2]
    assert rewritten[1]["content"][0] == parts[1]["content"][0]
    assert rewritten[1]["content"][1]["text"] == plan.block.rewrite(text, names[:4])
    assert parts[1]["content"][1]["text"] == text  # the client's messages are not mutated
    # A tool block in a user message is not the agent's tool list.
    assert find_text_plan([{"role": "user", "content": text}], PRESETS, MIN_ENTRIES) is None


async def test_long_system_texts_are_searched_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    searched_in: list[int] = []

    def recording_detect(
        text: str, formats: Sequence[TextFormat], min_entries: int
    ) -> ToolBlock | None:
        searched_in.append(threading.get_ident())
        return detect(text, formats, min_entries)

    monkeypatch.setattr(text_plan, "detect", recording_detect)
    text, _ = preset_prompt("markdown")
    short = [{"role": "system", "content": text}]
    long = [{"role": "system", "content": text + " " * SEARCH_IN_THREAD_CHARS}]
    short_plan = await search_text_plan(short, PRESETS, MIN_ENTRIES)
    long_plan = await search_text_plan(long, PRESETS, MIN_ENTRIES)
    assert searched_in[0] == threading.get_ident()  # short: on the loop
    assert searched_in[1] != threading.get_ident()  # long: in a worker thread
    assert short_plan is not None and long_plan is not None
    assert long_plan.block.entries == short_plan.block.entries


# --- tool calls written as text ----------------------------------------------------


CATALOGUE = {"browser_click", "browser_navigate", "read_file", "replace_in_file", "get_me", "create_issue"}


def assistant(content: object) -> dict[str, object]:
    return {"role": "assistant", "content": content}


def test_text_called_tools_recognises_hermes_tool_call_blocks() -> None:
    content = (
        "I'll open the page first.\n<tool_call>\n"
        '{"name": "browser_navigate", "arguments": {"url": "https://example.com"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "browser_click", "arguments": {"ref": "e12"}}\n</tool_call>'
    )
    assert text_called_tools([assistant(content)], CATALOGUE) == ["browser_navigate", "browser_click"]


def test_text_called_tools_recognises_an_xml_element_named_after_a_tool() -> None:
    content = (
        "Let me look at the file.\n\n<read_file>\n<path>src/app.ts</path>\n"
        "<start_line>1</start_line>\n</read_file>"
    )
    # <path> and <start_line> are parameters, not catalogue tools.
    assert text_called_tools([assistant(content)], CATALOGUE) == ["read_file"]


@pytest.mark.parametrize(
    "content",
    [
        '{"tool": "create_issue", "args": {"title": "Crash on start"}}',
        '{"name": "create_issue", "arguments": {"title": "Crash on start"}}',
        'Calling it now:\n```json\n{\n  "tool" : "create_issue",\n  "args": {}\n}\n```',
    ],
)
def test_text_called_tools_recognises_a_json_object_naming_a_tool(content: str) -> None:
    assert text_called_tools([assistant(content)], CATALOGUE) == ["create_issue"]


def test_text_called_tools_reads_only_assistant_messages_in_order_of_appearance() -> None:
    messages = [
        {"role": "system", "content": "<get_me></get_me>"},
        {"role": "user", "content": '{"tool": "browser_click"}'},
        assistant('{"tool": "get_me", "args": {}}'),
        {"role": "user", "content": '{"login": "octocat"}'},
        assistant("<replace_in_file>\n<path>a.ts</path>\n</replace_in_file> and <read_file>"),
        assistant('{"tool": "get_me", "args": {}}'),
        assistant('{"tool": "delete_everything", "args": {}}'),
        assistant(None),
        "not a message",
    ]
    assert text_called_tools(messages, CATALOGUE) == ["get_me", "replace_in_file", "read_file"]


def test_text_called_tools_reads_assistant_content_parts() -> None:
    content = [{"type": "text", "text": '<tool_call>\n{"name": "get_me", "arguments": {}}\n</tool_call>'}]
    assert text_called_tools([assistant(content)], CATALOGUE) == ["get_me"]
