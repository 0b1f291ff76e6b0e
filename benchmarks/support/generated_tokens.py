"""The tokens a model generates for an answer, counted by llama-server itself: the answer as
its chat template writes it after the request's prompt, in the model's own tokens.

For one request and the upstream's answer to it (the assistant message of
:func:`benchmarks.support.answer_messages.assistant_message`):

1. The prompt: the request rendered by ``POST /apply-template`` (what the chat route
   renders, the generation prompt ``<|im_start|>assistant\\n`` of the Qwen2.5 template at
   its end) and tokenized (:mod:`benchmarks.support.llama_tokens`).
2. The conversation with the answer: the same request with the answer appended, then a
   user message (:data:`CLOSING_TURN`: a conversation ending with an assistant message is
   rendered as a prefill to continue, without its tool calls and end of turn), rendered.
   It starts with the prompt's text (else :class:`GeneratedTokensError`); what follows,
   up to and including the model's end-of-generation token (``eos_token`` of ``GET
   /props``: ``<|im_end|>`` here), is what the model writes: its text, its calls in the
   template's form (Qwen2.5: hermes ``<tool_call>{"name": …, "arguments": …}</tool_call>``
   blocks), and the token that ends its turn, which llama-server samples and counts in
   ``timings.predicted_n``.
3. The count: the tokens of the prompt's text followed by the answer's, less the
   prompt's tokens (``POST /tokenize`` with ``add_special`` and ``parse_special``, as the
   chat route tokenizes), so a token spanning the boundary is counted once, as the
   model's.

The count is the canonical tokenization of what the model wrote; a model that sampled a
non-canonical split of the same text would have generated a few more tokens. API
reference: llama.cpp ``tools/server/README.md`` (``/apply-template``, ``/tokenize``,
``/props``); ``tools/server/server-common.cpp`` (``oaicompat_chat_params_parse``: a
final assistant message is a prefill).
"""

from __future__ import annotations

from typing import Any

import httpx

from benchmarks.support.llama_chat_shape import ChatShapeError, chat_shape
from benchmarks.support.llama_tokens import TOKENIZE_TIMEOUT, Prompt, tokenize

#: The user message after the answer, so that the template closes the answer's turn.
CLOSING_TURN = {"role": "user", "content": "."}


class GeneratedTokensError(ValueError):
    """The template did not render the answer after the prompt (its message says how)."""


def answer_text(prompt_text: str, rendered: str, end_of_generation: str) -> str:
    """What the model writes after ``prompt_text`` in the conversation ``rendered`` with
    its answer: the text up to and including the first ``end_of_generation``."""
    if not rendered.startswith(prompt_text):
        raise GeneratedTokensError("the conversation with the answer does not start with "
                                   "the request's prompt")
    rest = rendered[len(prompt_text):]
    end = rest.find(end_of_generation)
    if end < 0:
        raise GeneratedTokensError(f"no {end_of_generation!r} after the answer")
    return rest[:end + len(end_of_generation)]


def generated_count(prompt_ids: list[int], with_answer_ids: list[int]) -> int:
    """The answer's tokens: those of the prompt followed by the answer less the prompt's
    (both tokenized whole, BOS included)."""
    if with_answer_ids[:len(prompt_ids) - 1] != prompt_ids[:-1]:
        raise GeneratedTokensError("the prompt's tokens changed before its last one")
    return len(with_answer_ids) - len(prompt_ids)


class GeneratedCounter:
    """Counts answers' tokens on the llama-server at ``origin`` (``http://host:port``)."""

    def __init__(self, client: httpx.Client, origin: str) -> None:
        self.client = client
        self.origin = origin
        self._end: str | None = None

    @property
    def end_of_generation(self) -> str:
        """The model's end-of-generation token's text (``/props`` ``eos_token``)."""
        if self._end is None:
            props = self.client.get(self.origin + "/props", timeout=TOKENIZE_TIMEOUT)
            props.raise_for_status()
            self._end = str(props.json()["eos_token"])
        return self._end

    def count(self, path: str, body: dict[str, Any], message: dict[str, Any],
              prompt: Prompt) -> int | None:
        """The tokens the model generates to answer ``message`` to the request ``body``
        on ``path`` whose prompt is ``prompt`` (None: llama-server refuses the request).
        Raises :class:`GeneratedTokensError` and ``httpx.HTTPError``."""
        if prompt.ids is None or prompt.text is None:
            return None
        try:
            chat = chat_shape(path, body)
        except ChatShapeError:
            return None
        conversation = {**chat, "messages": [*chat["messages"], message, CLOSING_TURN]}
        rendered = self.client.post(self.origin + "/apply-template", json=conversation,
                                    timeout=TOKENIZE_TIMEOUT)
        rendered.raise_for_status()
        text = answer_text(prompt.text, rendered.json()["prompt"], self.end_of_generation)
        return generated_count(prompt.ids, tokenize(self.client, self.origin, prompt.text + text))
