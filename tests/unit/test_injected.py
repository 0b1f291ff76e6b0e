"""Blocks a client injects beside the user's words (selection.conversation.injected) and the query
made without them (selection.conversation.query). The texts are written for these tests in the shapes
coding agents send: a reminder as its own content part or before the prompt, an
environment and instructions as user messages of their own, a block after the prompt."""

from __future__ import annotations

from selection.conversation.injected import MAX_BLOCKS, strip_blocks
from selection.conversation.query import build_query, own_text, query_parts

PROMPT = "List the open pull requests in octo/widgets"
REMINDER = (
    "<system-reminder>\nContext that may matter: the date is 2026-06-14; the task list "
    "is empty, create tasks for work of several steps.\n</system-reminder>\n\n"
)
ENVIRONMENT = (
    "<environment_context>\n  <cwd>/home/dev/widgets</cwd>\n  <shell>bash</shell>\n"
    "</environment_context>"
)
INSTRUCTIONS = '<user_instructions source="AGENTS.md">\nRun the tests before a commit.\n</user_instructions>'


def user(content: object) -> dict:
    return {"role": "user", "content": content}


def test_a_leading_block_goes_and_the_prompt_stays() -> None:
    assert strip_blocks(REMINDER + PROMPT) == PROMPT


def test_a_trailing_block_on_lines_of_its_own_goes() -> None:
    assert strip_blocks(f"{PROMPT}\n<system-reminder>\nIgnore if irrelevant.\n</system-reminder>") == PROMPT


def test_blocks_of_any_lower_case_tag_go_not_only_known_names() -> None:
    text = f"<ide_opened_file>\nsrc/app.py\n</ide_opened_file>\n{PROMPT}\n<hook-output>ok</hook-output>"
    assert strip_blocks(text) == PROMPT


def test_an_element_with_attributes_and_nested_elements_is_one_block() -> None:
    assert strip_blocks(f"{INSTRUCTIONS}\n{ENVIRONMENT}\n{PROMPT}") == PROMPT


def test_tags_inside_the_users_sentences_stay() -> None:
    for text in ("Make the <b>title</b> bold", "<b>Why</b> does this fail?",
                 "Rename <old> to <new> in the config",
                 "Wrap it in <div>x</div>, then commit", "Fix it: <a>x</a> and more"):
        assert strip_blocks(text) == text


def test_a_block_that_does_not_start_or_end_a_line_is_the_users() -> None:
    assert strip_blocks("see <note>this</note>") == "see <note>this</note>"
    assert strip_blocks("<note>this</note> is broken") == "<note>this</note> is broken"


def test_upper_case_or_unclosed_tags_are_not_blocks() -> None:
    for text in (f"<Context>\nx\n</Context>\n{PROMPT}", f"<system-reminder>\nnever closed\n{PROMPT}",
                 f"<a>\nx\n</b>\n{PROMPT}"):
        assert strip_blocks(text) == text.strip()


def test_only_blocks_strip_to_nothing() -> None:
    assert strip_blocks(REMINDER + ENVIRONMENT) == ""


def test_at_most_max_blocks_go_from_each_end() -> None:
    many = "".join(f"<b{i}>\nx\n</b{i}>\n" for i in range(MAX_BLOCKS + 3))
    assert strip_blocks(many + PROMPT).startswith("<b32>")


def test_a_content_part_that_is_a_block_is_left_out() -> None:
    content = [{"type": "text", "text": REMINDER}, {"type": "text", "text": PROMPT}]
    assert own_text(content) == PROMPT
    assert query_parts([user(content)]) == [PROMPT]


def test_user_messages_of_blocks_only_do_not_count_as_the_users_messages() -> None:
    messages = [user(INSTRUCTIONS), user(ENVIRONMENT), user(PROMPT)]
    assert build_query(messages, user_messages=2) == PROMPT


def test_the_users_earlier_message_still_joins_the_query() -> None:
    messages = [user("Open the widgets repository"), {"role": "assistant", "content": "ok"},
                user(ENVIRONMENT), user(REMINDER + PROMPT)]
    assert build_query(messages, user_messages=2) == f"Open the widgets repository\n{PROMPT}"


def test_a_conversation_of_blocks_only_keeps_them_so_the_query_is_never_empty() -> None:
    assert build_query([user(ENVIRONMENT)]) == ENVIRONMENT


def test_a_tool_result_loses_a_trailing_block_but_one_that_is_only_a_block_stays() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [user(PROMPT), {"role": "assistant", "content": None, "tool_calls": [call]}]
    reminder_after = {"role": "tool", "tool_call_id": "c1", "content": "#12 Fix the build\n" + REMINDER}
    assert build_query([*messages, reminder_after]) == f"{PROMPT}\n#12 Fix the build"
    xml_result = {"role": "tool", "tool_call_id": "c1", "content": "<functions>\n<function>f</function>\n</functions>"}
    assert build_query([*messages, xml_result]).endswith("</functions>")


def test_a_user_message_of_blocks_only_after_tool_results_leaves_them_trailing() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [user(PROMPT), {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "#12 Fix the build"},
                user([{"type": "text", "text": REMINDER}])]
    assert build_query(messages) == f"{PROMPT}\n#12 Fix the build"
