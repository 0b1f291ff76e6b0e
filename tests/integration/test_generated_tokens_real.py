"""The generated tokens of the session benchmarks (``benchmarks/support/generated_tokens.py``
reading answers with ``benchmarks/support/answer_messages.py``) against a real
llama-server: SmolLM2 answers a request, greedy, and the count of its answer as the chat
template writes it equals the tokens llama-server says it generated
(``timings.predicted_n``, the end-of-generation token included), whole and streamed; a
tool call is written in the Qwen2.5 template's hermes form; and llama-server puts
``timings`` where ``benchmarks/support/timed_answers.py`` puts them (a chat completion,
a streamed chat's last chunk, a streamed response's ``response.completed``; no Messages
answer, no whole response).

Marked ``real_upstream``: run with ``pytest -m real_upstream`` (the first run builds
llama-server, see ``deploy/local_llama.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from benchmarks.support.answer_messages import assistant_message, sse_data
from benchmarks.support.generated_tokens import GeneratedCounter
from benchmarks.support.llama_replay import fresh_llama
from benchmarks.support.llama_tokens import prompt_of

pytestmark = pytest.mark.real_upstream

CTX = 4096
CHAT = "/v1/chat/completions"
QUESTIONS = ["Name three colours.", "What is the capital of France? Answer in one sentence.",
             "Write a haiku about rain."]


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with fresh_llama(tmp_path_factory.mktemp("llama"), "llama-generated", CTX) as found:
        yield found


def _body(question: str, stream: bool = False) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 40, "stream": stream, "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": question}]}


def _count(origin: str, path: str, body: dict[str, Any], answer: bytes) -> int | None:
    with httpx.Client() as client:
        prompt = prompt_of(client, origin, path, body)
        return GeneratedCounter(client, origin).count(path, body, assistant_message(path, answer),
                                                      prompt)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("question", QUESTIONS)
def test_the_count_of_an_answer_is_the_tokens_llama_server_generated(
        origin: str, question: str, stream: bool) -> None:
    body = _body(question, stream)
    response = httpx.post(origin + CHAT, json=body, timeout=300)
    assert response.status_code == 200
    if stream:
        last = sse_data(response.content)[-1]
        finish = next(c["choices"][0]["finish_reason"] for c in sse_data(response.content)
                      if c["choices"] and c["choices"][0].get("finish_reason"))
    else:
        last = response.json()
        finish = last["choices"][0]["finish_reason"]
    generated = last["timings"]["predicted_n"]
    # Cut at max_tokens, the model wrote no end-of-generation token; the count adds it.
    assert _count(origin, CHAT, body, response.content) == generated + (finish == "length")


def test_a_tool_call_is_written_in_the_templates_hermes_form(origin: str) -> None:
    body = {**_body("List the open pull requests in octo/widgets."), "tools": [
        {"type": "function", "function": {"name": "list_pull_requests", "parameters": {
            "type": "object", "properties": {"owner": {"type": "string"}}}}}]}
    arguments = json.dumps({"owner": "octo"})
    answer = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function",
         "function": {"name": "list_pull_requests", "arguments": arguments}}]}}]}
    with httpx.Client() as client:
        prompt = prompt_of(client, origin, CHAT, body)
        counter = GeneratedCounter(client, origin)
        message = assistant_message(CHAT, json.dumps(answer).encode())
        count = counter.count(CHAT, body, message, prompt)
        conversation = {**body, "messages": [*body["messages"], message,
                                             {"role": "user", "content": "."}]}
        rendered = client.post(origin + "/apply-template", json=conversation).json()["prompt"]
    assert prompt.text is not None and rendered.startswith(prompt.text)
    written = rendered[len(prompt.text):]
    assert written.startswith('<tool_call>\n{"name": "list_pull_requests", "arguments": {"owner"')
    assert "</tool_call><|im_end|>" in written
    with httpx.Client() as client:
        alone = client.post(origin + "/tokenize", json={
            "content": written[:written.index("<|im_end|>") + 10], "parse_special": True})
    assert count is not None and abs(count - len(alone.json()["tokens"])) <= 1


def test_llama_server_puts_timings_where_the_timed_answers_do(origin: str) -> None:
    question = _body(QUESTIONS[0])
    responses = {"model": "m", "max_output_tokens": 8, "input": QUESTIONS[0]}
    messages = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": QUESTIONS[0]}]}
    # One connection per request: llama-server closes one after a streamed response
    # without saying so, and a reused connection then fails.
    def post(path: str, body: dict[str, Any]) -> bytes:
        return httpx.post(origin + path, json=body, timeout=300).content

    whole_chat = json.loads(post(CHAT, question))
    chunks = sse_data(post(CHAT, {**question, "stream": True,
                                  "stream_options": {"include_usage": True}}))
    whole_response = json.loads(post("/v1/responses", responses))
    events = sse_data(post("/v1/responses", {**responses, "stream": True}))
    whole_message = json.loads(post("/v1/messages", messages))
    message_events = sse_data(post("/v1/messages", {**messages, "stream": True}))
    assert "prompt_per_second" in whole_chat["timings"]
    assert [bool(c.get("timings")) for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1]["choices"] == []
    assert "timings" not in whole_response
    assert [e["type"] for e in events if "timings" in e] == ["response.completed"]
    assert "timings" not in whole_message and all("timings" not in e for e in message_events)


def test_the_models_end_of_generation_is_the_templates_end_of_turn(origin: str) -> None:
    with httpx.Client() as client:
        assert GeneratedCounter(client, origin).end_of_generation == "<|im_end|>"
