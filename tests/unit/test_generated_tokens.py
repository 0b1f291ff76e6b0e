"""The generated tokens of ``benchmarks/agent_sessions.py --long`` and ``--simulate``
without llama-server: what the model wrote in an answer of each API, whole and streamed
(benchmarks/support/answer_messages.py), the answer's text after the prompt and its
count by difference (benchmarks/support/generated_tokens.py), and the ``timings`` a
learned via's upstream puts where llama-server does (benchmarks/support/timed_answers.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.support.answer_messages import AnswerError, assistant_message, sse_data
from benchmarks.support.api_replies import Message, Responses
from benchmarks.support.chat_replies import Chat
from benchmarks.support.generated_tokens import (
    GeneratedTokensError,
    answer_text,
    generated_count,
)
from benchmarks.support.hardware_profiles import profile_named
from benchmarks.support.timed_answers import timings, with_timings

CALL = {"id": "call_1", "name": "list_pull_requests",
        "arguments": json.dumps({"owner": "octo", "repo": "widgets"})}


def _bytes(rendered: dict[str, Any] | list[bytes]) -> bytes:
    return b"".join(rendered) if isinstance(rendered, list) else json.dumps(rendered).encode()


@pytest.mark.parametrize("stream", [False, True])
def test_a_chat_answer_is_its_text_and_its_calls(stream: bool) -> None:
    reply = Chat(content="Looking.", tool_calls=[CALL])
    body = _bytes(reply.render({"stream": stream}, 100))
    message = assistant_message("/v1/chat/completions", body)
    assert message["content"] == "Looking."
    assert message["tool_calls"][0]["function"] == {"name": CALL["name"],
                                                    "arguments": CALL["arguments"]}


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_answer_flattens_a_namespace_call_and_writes_a_client_search(stream: bool) -> None:
    search = {"id": "tsc_1", "type": "tool_search_call", "call_id": "c1", "execution": "client",
              "status": "completed", "arguments": {"query": "create issue"}}
    reply = Responses(text=None, items=[search], calls=[
        {"call_id": "c2", "name": "list_pull_requests", "namespace": "mcp__github",
         "arguments": "{}"}])
    message = assistant_message("/v1/responses", _bytes(reply.render({"stream": stream}, 100)))
    assert message["content"] is None
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]] == [
        ("tool_search", '{"query":"create issue"}'), ("mcp__github__list_pull_requests", "{}")]


@pytest.mark.parametrize("stream", [False, True])
def test_a_messages_answer_writes_the_search_and_the_call_not_the_servers_result(stream: bool) -> None:
    blocks = [{"type": "server_tool_use", "id": "srv_1", "name": "tool_search_tool_regex",
               "input": {"query": "pull"}},
              {"type": "tool_search_tool_result", "tool_use_id": "srv_1",
               "content": {"type": "tool_search_tool_search_result", "tool_references": []}}]
    reply = Message(text="On it.", blocks=blocks, calls=[
        {"id": "toolu_1", "name": "mcp__github__list_pull_requests",
         "input": {"owner": "octo", "repo": "wídgets"}}])
    message = assistant_message("/v1/messages", _bytes(reply.render({"stream": stream}, 100)))
    assert message["content"] == "On it."
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]] == [
        ("tool_search_tool_regex", '{"query":"pull"}'),
        ("mcp__github__list_pull_requests", '{"owner":"octo","repo":"wídgets"}')]


def test_an_answer_cut_short_or_of_another_route_is_a_clear_error() -> None:
    with pytest.raises(AnswerError, match="without response.completed"):
        assistant_message("/v1/responses", b'data: {"type": "response.created"}\n\n')
    with pytest.raises(AnswerError, match="not an answer of /v1/chat/completions"):
        assistant_message("/v1/chat/completions", b'{"choices": []}')
    with pytest.raises(AnswerError, match="not JSON"):
        assistant_message("/v1/messages", b"<html>")
    with pytest.raises(AnswerError, match="not a model route"):
        assistant_message("/v1/embeddings", b"{}")


def test_the_answer_is_what_follows_the_prompt_through_the_end_of_generation() -> None:
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    rendered = prompt + "<tool_call>\n{}\n</tool_call><|im_end|>\n<|im_start|>user\n.<|im_end|>\n"
    assert answer_text(prompt, rendered, "<|im_end|>") == "<tool_call>\n{}\n</tool_call><|im_end|>"
    with pytest.raises(GeneratedTokensError, match="does not start"):
        answer_text(prompt + "x", rendered, "<|im_end|>")
    with pytest.raises(GeneratedTokensError, match="no '</s>'"):
        answer_text(prompt, rendered, "</s>")


def test_the_count_is_the_difference_and_a_merged_last_token_counts_once() -> None:
    assert generated_count([1, 5, 6, 7], [1, 5, 6, 7, 8, 9, 2]) == 3
    # The prompt's last token ("\n") merged with the answer's first: one token fewer.
    assert generated_count([1, 5, 6, 7], [1, 5, 6, 70, 9, 2]) == 2
    with pytest.raises(GeneratedTokensError, match="changed"):
        generated_count([1, 5, 6, 7], [1, 4, 6, 7, 8])


FOUND = timings(profile_named("apple-m3-max"), prompt_n=1010, cache_n=20, predicted_n=98)


def test_timings_say_the_profiles_speeds_in_llama_servers_fields() -> None:
    assert FOUND["prompt_per_second"] == 505.0 and FOUND["predicted_per_second"] == 49.0
    assert FOUND["prompt_ms"] == pytest.approx(2000.0)
    assert FOUND["predicted_ms"] == pytest.approx(2000.0)
    assert (FOUND["prompt_n"], FOUND["cache_n"], FOUND["predicted_n"]) == (1010, 20, 98)


@pytest.mark.parametrize("usage", [False, True])
def test_a_streamed_chat_answer_carries_timings_on_its_last_chunk(usage: bool) -> None:
    request = {"stream": True, **({"stream_options": {"include_usage": True}} if usage else {})}
    events = with_timings("/v1/chat/completions", Chat().render(request, 100), FOUND)
    chunks = sse_data(b"".join(events))
    assert chunks[-1]["timings"] == FOUND and all("timings" not in c for c in chunks[:-1])
    assert (chunks[-1]["choices"] == []) is usage
    whole = with_timings("/v1/chat/completions", Chat().render({}, 100), FOUND)
    assert isinstance(whole, dict) and whole["timings"] == FOUND


def test_responses_carry_timings_on_the_completed_event_only_and_messages_none() -> None:
    events = with_timings("/v1/responses", Responses().render({"stream": True}, 100), FOUND)
    data = sse_data(b"".join(events))
    assert [event["type"] for event in data if "timings" in event] == ["response.completed"]
    whole = Responses().render({}, 100)
    assert with_timings("/v1/responses", whole, FOUND) is whole
    streamed = Message().render({"stream": True}, 100)
    assert with_timings("/v1/messages", streamed, FOUND) is streamed
