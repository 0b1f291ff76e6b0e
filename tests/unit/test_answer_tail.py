"""A relayed answer's last bytes read for the server's speeds
(:class:`proxy.servers.answer_tail.AnswerTail`): llama-server's ``timings`` and the
``usage`` beside them, on a stream's last event or a body, however the bytes were cut
into chunks; nothing from an answer that cannot say it."""

from __future__ import annotations

import json
from functools import partial
from itertools import count

from config.settings import Settings
from proxy.servers.answer_tail import TAIL_BYTES, AnswerTail
from proxy.servers.speeds import RoundTiming, SpeedBook

TIMINGS = {"prompt_n": 2400, "prompt_n_cached": 0, "prompt_ms": 800.0, "predicted_n": 30,
           "predicted_ms": 1500.0}
USAGE = {"prompt_tokens": 2400, "completion_tokens": 30, "total_tokens": 2430}


class Answer:
    """The edge of the unit: what the relay's upstream response tells (status, headers)."""

    def __init__(self, content_type: bytes, status: int = 200, encoding: bytes | None = None) -> None:
        self.status_code = status
        self._headers = {b"content-type": content_type, b"content-encoding": encoding}

    def header(self, name: bytes) -> bytes | None:
        return self._headers.get(name)


STREAM = Answer(b"text/event-stream")
JSON = Answer(b"application/json")


def chunk_event(data: dict) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def stream(tokens: int) -> bytes:
    """A llama-server chat stream: ``tokens`` content chunks, the last event with
    ``timings`` and ``usage``, then ``[DONE]``."""
    events = [chunk_event({"choices": [{"index": 0, "delta": {"content": f"w{i} "}}]})
              for i in range(tokens)]
    events.append(chunk_event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                               "timings": TIMINGS, "usage": USAGE}))
    return b"".join(events) + b"data: [DONE]\n\n"


def watched(raw: bytes, answer: Answer, size: int) -> list[RoundTiming]:
    """``raw`` relayed in chunks of ``size`` bytes, the clock ticking one second a chunk;
    what the tail learned."""
    learned: list[RoundTiming] = []
    clock = count(1.0)
    tail = AnswerTail(0.0, learned.append, lambda: next(clock))
    for at in range(0, len(raw), size):
        tail.seen(raw[at:at + size])
    tail.ended(answer)  # type: ignore[arg-type]
    return learned


def test_a_streams_last_event_gives_timings_and_usage_whatever_the_chunks() -> None:
    raw = stream(20)
    for size in (1, 7, 64, len(raw)):
        (timing,) = watched(raw, STREAM, size)
        assert timing.timings == TIMINGS and timing.usage == USAGE
        chunks = -(-len(raw) // size)
        assert (timing.sent, timing.first, timing.last) == (0.0, 1.0, float(chunks))
        assert timing.streamed


def test_a_long_stream_keeps_only_its_tail_and_still_reads_the_last_event() -> None:
    raw = stream(2_000)
    assert len(raw) > 8 * TAIL_BYTES
    learned: list[RoundTiming] = []
    tail = AnswerTail(0.0, learned.append, lambda: 1.0)
    for at in range(0, len(raw), 100):
        tail.seen(raw[at:at + 100])
        assert tail._kept < TAIL_BYTES + 100
    tail.ended(STREAM)  # type: ignore[arg-type]
    (timing,) = learned
    assert timing.timings == TIMINGS


def test_a_body_read_whole_or_by_its_last_members() -> None:
    small = json.dumps({"choices": [{"message": {"content": "A title"}}], "usage": USAGE,
                        "timings": TIMINGS}).encode()
    (timing,) = watched(small, JSON, 10)
    assert (timing.timings, timing.usage, timing.streamed) == (TIMINGS, USAGE, False)
    long_text = "word " * (2 * TAIL_BYTES)
    large = json.dumps({"choices": [{"message": {"content": long_text}}], "usage": USAGE,
                        "timings": TIMINGS}).encode()
    (timing,) = watched(large, JSON, 4096)
    assert timing.timings == TIMINGS and timing.usage == USAGE


def test_an_answer_that_cannot_say_teaches_nothing() -> None:
    raw = stream(3)
    assert watched(raw, Answer(b"text/event-stream", encoding=b"gzip"), 16) == []
    assert watched(raw, Answer(b"text/event-stream", status=500), 16) == []
    plain = stream(3).replace(b'"timings"', b'"other"').replace(b'"usage"', b'"other2"')
    assert watched(plain, STREAM, 16) == []
    assert watched(b"<html>not json</html>", Answer(b"text/html"), 4) == []
    cut = json.dumps({"content": "x" * (2 * TAIL_BYTES)}).encode() + b', "timings": {"prompt'
    assert watched(cut, JSON, 4096) == []


def test_the_speed_book_learns_from_a_relayed_stream() -> None:
    book = SpeedBook(Settings())
    tail = AnswerTail(0.0, partial(book.observe, "qwen"), lambda: 1.0)
    tail.seen(stream(5))
    tail.ended(STREAM)  # type: ignore[arg-type]
    speed = book.speed("qwen")
    assert (speed.prefill_tps, speed.decode_tps) == (3000.0, 20.0)
    assert speed.prefill_source == speed.decode_source == "timings"
