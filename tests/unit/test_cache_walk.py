"""The simulated llama-server prompt cache (benchmarks/support/cache_walk.py) on hand-made
token lists: the common prefix, the ``n_cache_reuse`` chunk walk, the at-least-one rule,
what stays of an answer, a model that cannot shift, the RAM prompt cache, a prompt over
the context; and the Chat Completions shape llama-server gives Responses and Messages
requests (benchmarks/support/llama_chat_shape.py). Checked against a real llama-server in
tests/integration/test_cache_walk_real.py."""

from __future__ import annotations

import json

import pytest

from benchmarks.support.cache_walk import Slot, reused
from benchmarks.support.llama_chat_shape import ChatShapeError, messages_to_chat, responses_to_chat

BLOCK = list(range(100, 160))  # a tool block of 60 tokens
HISTORY = list(range(500, 540))


def test_an_appended_turn_evaluates_only_its_tokens() -> None:
    slot = Slot(1000)
    assert slot.request([1, *BLOCK, *HISTORY]).evaluated == 101
    second = slot.request([1, *BLOCK, *HISTORY, 7, 8, 9])
    assert (second.evaluated, second.cached) == (3, 101)


def test_a_prompt_served_whole_from_the_cache_evaluates_its_last_token() -> None:
    slot = Slot(1000)
    slot.request([1, *BLOCK])
    assert slot.request([1, *BLOCK]).evaluated == 1


def test_without_chunk_reuse_a_removal_evaluates_everything_after_it() -> None:
    slot = Slot(1000)
    slot.request([1, *BLOCK, *HISTORY])
    fewer = [1, *BLOCK[:20], *BLOCK[30:], *HISTORY]
    assert slot.request(fewer, n_cache_reuse=0).evaluated == len(fewer) - 21


def test_chunk_reuse_steps_over_a_removal() -> None:
    slot = Slot(1000)
    slot.request([1, *BLOCK, *HISTORY])
    fewer = [1, *BLOCK[:20], *BLOCK[30:], *HISTORY, 9]
    assert slot.request(fewer, n_cache_reuse=8).evaluated == 1


def test_chunk_reuse_stops_at_an_insertion() -> None:
    slot = Slot(1000)
    slot.request([1, *BLOCK, *HISTORY])
    grown = [1, *BLOCK[:20], 900, 901, *BLOCK[20:], *HISTORY]
    # The inserted tokens match no chunk of the cache: nothing after them is reused.
    assert slot.request(grown, n_cache_reuse=8).evaluated == len(grown) - 21


def test_a_chunk_shorter_than_n_cache_reuse_is_evaluated_again() -> None:
    cached = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    prompt = [1, 2, 5, 6, 7, 9, 10]  # 3, 4 and 8 removed: chunks of 3 and 2 tokens follow
    assert reused(cached, prompt, n_cache_reuse=3) == 5
    assert reused(cached, prompt, n_cache_reuse=2) == 7
    assert reused(cached, prompt, n_cache_reuse=4) == 2


def test_a_model_that_cannot_shift_reuses_its_prefix_alone() -> None:
    slot = Slot(1000, can_shift=False)
    slot.request([1, *BLOCK, *HISTORY])
    fewer = [1, *BLOCK[:20], *BLOCK[30:], *HISTORY]
    assert slot.request(fewer, n_cache_reuse=8).evaluated == len(fewer) - 21


def test_the_answer_stays_in_the_cache_but_its_last_token() -> None:
    slot = Slot(1000)
    slot.request([1, *BLOCK], generated=[40, 41, 42, 2])  # 2: the end-of-turn token
    assert slot.tokens == [1, *BLOCK, 40, 41, 42]
    assert slot.request([1, *BLOCK, 40, 41, 42, 2, 60]).evaluated == 2


def test_a_side_request_is_followed_by_the_conversation_loaded_from_the_ram_cache() -> None:
    slot = Slot(1000)
    conversation = [1, *BLOCK, *HISTORY]
    slot.request(conversation)
    side = [1, 800, 801, 802, 803, 804]  # another system prompt: the first token shared
    assert slot.request(side).evaluated == 5
    assert slot.request([*conversation, 9]).evaluated == 1


def test_without_the_ram_cache_the_conversation_is_evaluated_again() -> None:
    slot = Slot(1000, cache_ram_mib=0)
    conversation = [1, *BLOCK, *HISTORY]
    slot.request(conversation)
    slot.request([1, 800, 801, 802, 803, 804])
    assert slot.request([*conversation, 9]).evaluated == len(conversation)


def test_a_prompt_over_the_context_is_refused_and_the_slot_keeps_its_prompt() -> None:
    slot = Slot(100)
    slot.request([1, *BLOCK])
    refused = slot.request([1, *BLOCK, *HISTORY])
    assert refused.refused and refused.evaluated == 0
    assert slot.tokens == [1, *BLOCK]


def test_responses_items_become_chat_messages_as_llama_server_converts_them() -> None:
    body = {"model": "m", "instructions": "Be brief.", "n_cache_reuse": 256,
            "max_output_tokens": 5, "input": [
                {"role": "user", "content": "List the pull requests."},
                {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text",
                                                                  "text": "Use the tool."}]},
                {"type": "function_call", "call_id": "c1", "name": "list_pull_requests",
                 "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": "#1 Fix"},
            ], "tools": [{"type": "function", "name": "list_pull_requests", "parameters": {}},
                         {"type": "namespace", "name": "mcp__github__", "tools": []}]}
    chat = responses_to_chat(body)
    assert list(chat) == ["model", "n_cache_reuse", "messages", "tools", "max_tokens"]
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"text": "List the pull requests.", "type": "text"}]},
        {"role": "assistant", "content": [], "reasoning_content": "Use the tool.",
         "tool_calls": [{"function": {"arguments": "{}", "name": "list_pull_requests"},
                         "id": "c1", "type": "function"}]},
        {"content": "#1 Fix", "role": "tool", "tool_call_id": "c1"},
    ]
    assert chat["tools"] == [{"type": "function", "function": {
        "name": "list_pull_requests", "parameters": {}, "strict": True}}]


def test_a_client_tool_search_item_is_refused_as_llama_server_refuses_it() -> None:
    with pytest.raises(ChatShapeError, match="Cannot determine type"):
        responses_to_chat({"input": [{"type": "tool_search_call", "call_id": "c",
                                      "arguments": {"query": "issues"}}]})


def test_messages_become_chat_messages_as_llama_server_converts_them() -> None:
    body = {"model": "m", "max_tokens": 9, "n_cache_reuse": 256, "system": [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2; cch=a5145;"},
        {"type": "text", "text": "You are an agent."}], "messages": [
        {"role": "user", "content": "Go."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "find",
                                           "input": {"q": "é", "n": 2}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": "a"}, {"type": "tool_reference", "tool_name": "x"},
            {"type": "text", "text": "b"}]}]},
    ], "tools": [{"name": "find", "input_schema": {"type": "object"}}]}
    chat = messages_to_chat(body)
    assert "n_cache_reuse" not in chat and chat["max_tokens"] == 9
    system, user, assistant, tool = chat["messages"]
    assert system["content"] == ("x-anthropic-billing-header: cc_version=2; cch=fffff;"
                                 "You are an agent.")
    assert user == {"role": "user", "content": "Go."}
    assert assistant["content"] == "" and assistant["tool_calls"][0]["function"] == {
        "name": "find", "arguments": json.dumps({"q": "é", "n": 2}, separators=(",", ":"),
                                                ensure_ascii=False)}
    assert tool == {"role": "tool", "tool_call_id": "t1", "content": "ab"}
    assert chat["tools"] == [{"type": "function", "function": {
        "name": "find", "description": "", "parameters": {"type": "object"}}}]
