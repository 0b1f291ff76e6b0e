"""Tests for selection.conversation.query: what the retrieval query is made of."""

from __future__ import annotations

import pytest

from selection.conversation.query import (
    MIN_PART_WORDS,
    build_query,
    content_text,
    query_parts,
    split_sentences,
)


def user(content: object) -> dict:
    return {"role": "user", "content": content}


def assistant(content: object = None, calls: bool = False) -> dict:
    message: dict = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]
    return message


def tool(content: object, call_id: str = "c1") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_the_last_two_user_messages_make_the_query_by_default() -> None:
    messages = [
        {"role": "system", "content": "You are helpful."},
        user("the first request"),
        assistant("answer one"),
        user("the second request"),
        assistant("answer two"),
        user("the third request"),
    ]
    assert build_query(messages) == "the second request\nthe third request"


@pytest.mark.parametrize(
    ("n", "expected"),
    [(1, "a third ask"), (3, "a first ask\na second ask\na third ask"),
     (9, "a first ask\na second ask\na third ask")],
)
def test_the_number_of_user_messages_is_configurable(n: int, expected: str) -> None:
    messages = [user("a first ask"), user("a second ask"), assistant("x"), user("a third ask")]
    assert build_query(messages, user_messages=n) == expected


@pytest.mark.parametrize("fragment", ["Thanks.", "yes", "go on"])
def test_a_last_message_that_is_a_fragment_brings_the_one_before_it(fragment: str) -> None:
    """"Thanks." says nothing of the tools needed: the message it answers does."""
    messages = [user("List my open pull requests"), assistant("x"),
                user("Create an issue titled Triage stale pull requests"), assistant("Done."),
                user(fragment)]
    assert build_query(messages, user_messages=1) == (
        f"Create an issue titled Triage stale pull requests\n{fragment}"
    )
    # A message of three words or more stands alone.
    messages[-1] = user("Close it now")
    assert build_query(messages, user_messages=1) == "Close it now"


def test_system_and_assistant_prose_are_excluded() -> None:
    messages = [
        {"role": "system", "content": "SYSTEM PROMPT"},
        {"role": "developer", "content": "DEVELOPER"},
        user("book a flight"),
        assistant("ASSISTANT PROSE about hotels"),
    ]
    query = build_query(messages)
    assert query == "book a flight"


def test_trailing_tool_results_after_the_last_assistant_message_are_included() -> None:
    messages = [
        user("what is failing in CI?"),
        assistant(None, calls=True),
        tool("job build failed: missing dependency libfoo", "c1"),
        tool("job lint passed", "c2"),
    ]
    assert build_query(messages) == (
        "what is failing in CI?\njob build failed: missing dependency libfoo\njob lint passed"
    )


def test_legacy_function_results_count_as_tool_results() -> None:
    messages = [
        user("weather?"),
        assistant(None, calls=True),
        {"role": "function", "name": "f", "content": "rainy"},
    ]
    assert build_query(messages) == "weather?\nrainy"


def test_tool_results_before_the_last_assistant_message_are_excluded() -> None:
    messages = [
        user("question"),
        assistant(None, calls=True),
        tool("OLD RESULT"),
        assistant("Here is what I found."),
    ]
    assert build_query(messages) == "question"


def test_tool_results_followed_by_a_user_message_are_not_trailing() -> None:
    messages = [user("one"), assistant(None, calls=True), tool("OLD RESULT"), user("two")]
    assert build_query(messages) == "one\ntwo"


def test_content_given_as_a_list_of_parts_uses_its_text_parts() -> None:
    messages = [
        user(
            [
                {"type": "text", "text": "describe this"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                {"type": "text", "text": "and file it"},
            ]
        ),
        assistant(None, calls=True),
        tool([{"type": "text", "text": "result part"}]),
    ]
    assert build_query(messages) == "describe this\nand file it\nresult part"


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "a\nb"),
        ([{"type": "text", "text": 5}, "loose string", None, {"type": "input_audio"}], ""),
        (None, ""),
        (42, ""),
        ({"text": "not a list"}, ""),
        ([], ""),
    ],
)
def test_content_text_of_each_content_shape(content: object, text: str) -> None:
    assert content_text(content) == text


def test_the_query_is_the_trailing_max_chars_characters() -> None:
    messages = [user("a" * 50), user("b" * 50)]
    query = build_query(messages, max_chars=30)
    assert query == "b" * 30
    assert len(build_query(messages, max_chars=60)) == 60
    assert build_query(messages, max_chars=60).endswith("a" * 9 + "\n" + "b" * 50)


def test_a_query_shorter_than_max_chars_is_whole() -> None:
    assert build_query([user("short")], max_chars=4000) == "short"


def test_max_chars_zero_gives_an_empty_query() -> None:
    assert build_query([user("hello")], max_chars=0) == ""


def test_empty_or_whitespace_texts_are_dropped() -> None:
    messages = [user("real"), user("   "), assistant(None, calls=True), tool("")]
    assert build_query(messages) == "real"


def test_nothing_to_search_with_gives_an_empty_query() -> None:
    assert build_query([]) == ""
    assert build_query([{"role": "system", "content": "sys"}, assistant("hi")]) == ""


def test_malformed_messages_are_skipped() -> None:
    messages = ["not a message", None, 3, user("kept"), {"content": "no role"}]
    assert build_query(messages) == "kept"


# --------------------------------------------------------------------------- query parts


def test_split_sentences_cuts_at_sentence_ends_lines_and_connectives() -> None:
    text = (
        "Book a flight to Paris. Find a hotel near the Louvre; check the weather there!\n"
        "Convert 100 euros to dollars then email the plan to Ann and then add it to my calendar"
    )
    assert split_sentences(text) == [
        "Book a flight to Paris.",
        "Find a hotel near the Louvre;",
        "check the weather there!",
        "Convert 100 euros to dollars",
        "then email the plan to Ann",
        "and then add it to my calendar",
    ]


def test_split_sentences_drops_fragments_under_min_part_words() -> None:
    assert MIN_PART_WORDS == 3
    assert split_sentences("Thanks. Ok! Please list my open issues.") == [
        "Please list my open issues."
    ]
    assert split_sentences("") == []


def test_query_parts_are_the_query_then_its_sentences() -> None:
    text = "Book a flight to Paris. Then find a hotel near the Louvre."
    assert query_parts([user(text)]) == [
        text, "Book a flight to Paris.", "Then find a hotel near the Louvre."
    ]


def test_a_one_sentence_query_is_its_only_part() -> None:
    assert query_parts([user("what is the weather in Rome today?")]) == [
        "what is the weather in Rome today?"
    ]


def test_query_parts_include_each_trailing_tool_result_whole() -> None:
    messages = [
        user("what is failing in CI?"),
        assistant(None, calls=True),
        tool("job build failed. missing dependency libfoo", "c1"),
        tool("job lint passed with warnings", "c2"),
    ]
    query = build_query(messages)
    assert query_parts(messages) == [
        query,
        "what is failing in CI?",
        "job build failed. missing dependency libfoo",
        "job lint passed with warnings",
    ]


def test_query_parts_keep_the_newest_when_capped() -> None:
    text = "one two three. four five six. seven eight nine. ten eleven twelve."
    assert query_parts([user(text)], max_parts=2) == [
        text, "seven eight nine.", "ten eleven twelve."
    ]


def test_query_parts_come_from_the_user_messages_of_the_query() -> None:
    messages = [user("list all open issues. close the stale ones"), assistant("ok"),
                user("now email the report to Bob. and archive it afterwards")]
    assert query_parts(messages, user_messages=1)[1:] == [
        "now email the report to Bob.", "and archive it afterwards"
    ]
    assert query_parts(messages, user_messages=2)[1:] == [
        "list all open issues.", "close the stale ones",
        "now email the report to Bob.", "and archive it afterwards",
    ]


def test_query_parts_stay_within_the_query_window() -> None:
    old = "an older request about something else entirely."
    new = "create a branch named fix. open a pull request for it."
    parts = query_parts([user(old), user(new)], max_chars=len(new) + 10)
    assert parts[0] == build_query([user(old), user(new)], max_chars=len(new) + 10)
    assert parts[1:] == ["create a branch named fix.", "open a pull request for it."]
    assert sum(len(part) for part in parts[1:]) <= len(new) + 10


def test_duplicate_parts_are_embedded_once() -> None:
    assert query_parts([user("list my open issues. list my open issues.")]) == [
        "list my open issues. list my open issues.", "list my open issues."
    ]


def test_zero_max_parts_gives_the_whole_query_only() -> None:
    text = "Book a flight to Paris. Then find a hotel near the Louvre."
    assert query_parts([user(text)], max_parts=0) == [text]


def test_no_query_gives_no_parts() -> None:
    assert query_parts([]) == []
    assert query_parts([user("hello")], max_chars=0) == []
    assert query_parts([assistant("hi")]) == []
