"""How fast the model server reads a prompt (prefill) and writes an answer (decode), per
model, learned from its own answers.

What a request costs a user is the prompt tokens the server evaluates ÷ its prefill speed,
plus the tokens the model generates ÷ its decode speed, plus a fixed cost per request;
decode is 10–55× slower per token than prefill on the hardware people run (published
single-stream figures: H100 and RTX 4090 with llama.cpp ~25–55×, Ryzen AI NPU ~30×, Apple
M-series ~10–14×). The proxy plans in those seconds once it knows the speeds
(:class:`selection.plan.ServerSpeed`).

Sources, best first:

1. ``timings``: llama-server (and Lemonade's llama.cpp backend) puts it on a Chat
   Completions or Responses answer (the body, or the stream's last event; not on
   Messages): ``prompt_n`` tokens evaluated in ``prompt_ms``, ``predicted_n`` generated in
   ``predicted_ms`` (llama.cpp ``tools/server``, ``result_timings::to_json``). Also on
   the answers the proxy relays without reading them (an agent's side requests, which
   carry no tools: :mod:`proxy.servers.answer_tail` reads their last bytes once sent).
2. The answer's own timing, where it carries ``usage``: a streamed answer's generated
   tokens (``completion_tokens`` / ``output_tokens``) over the seconds from its first event
   to its last; its evaluated tokens (prompt tokens less ``cached_tokens`` /
   ``cache_read_input_tokens``) over the seconds before its first event.
3. Another replica's, where the state is shared (:class:`SpeedShare`: Redis, with
   ``TOOLPRUNE_STATE_URL``), while this replica has learned none itself.
4. ``TOOLPRUNE_PREFILL_TOKENS_PER_S`` / ``TOOLPRUNE_DECODE_TOKENS_PER_S``, for a server
   that reports neither.

Each speed is the throughput of the model's last :data:`WINDOW` samples (their tokens
over their seconds), so a few long prompts weigh more than many short ones; samples
shorter than :data:`MIN_PREFILL_TOKENS` / :data:`MIN_DECODE_TOKENS`, and those the proxy
timed itself in less than :data:`MIN_TIMED_S`, are left out (a server's fixed cost per
request and the network dominate them), and so are those faster than any server
(:data:`MAX_PREFILL_TPS` / :data:`MAX_DECODE_TPS`). A model's samples from ``timings`` replace any
it was timed by.

Beside its speeds, what one of the model's search rounds costs it to write: the tokens it
generated (``timings.predicted_n``, else ``usage.completion_tokens`` / ``output_tokens``) in
the rounds whose answer was only the proxy's search or load calls — the call, and whatever
the model reasoned or said before it (a reasoning model writes hundreds). The plan weighs a
search round it may spare by them (:attr:`selection.plan.ServerSpeed.search_call_tokens`);
the mean of the last :data:`WINDOW` such rounds, a count no model writes in one round
(over :data:`MAX_ROUND_TOKENS`) left out.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from config.settings import Settings

#: Samples each speed is the throughput of.
WINDOW = 32
#: Fewest tokens of a prefill sample (fewer: the fixed cost per request dominates).
MIN_PREFILL_TOKENS = 32
#: Fewest tokens of a decode sample the proxy timed (``timings`` time decode alone: one
#: token is a sample).
MIN_DECODE_TOKENS = 4
#: Fewest seconds of a sample timed by the proxy (an answer's own timing): a shorter one
#: is the network's and the server's fixed cost more than its speed.
MIN_TIMED_S = 0.25
#: Speeds no server reaches, tokens per second (about a hundred times the fastest
#: published single-stream figures: prefill ~10,000, decode ~500 for small models on a
#: datacenter GPU): a sample beyond them is a server's or a relay's error, left out so
#: that it cannot swamp the window.
MAX_PREFILL_TPS = 1_000_000.0
MAX_DECODE_TPS = 50_000.0
#: Most tokens a model writes in one round: no context window holds more (the largest
#: local models' are 128k–1M tokens, and a round's output is a fraction of it); a count
#: beyond it is a server's error, left out so that it cannot make every search round look
#: dear.
MAX_ROUND_TOKENS = 131_072
#: Models whose speeds are kept.
MAX_MODELS = 64
#: Seconds between two writes, or two reads, of one model's speeds to the shared store.
SHARE_INTERVAL_S = 10.0


class SpeedShare(Protocol):
    """Where replicas share what they learned (:class:`proxy.state.speeds.SharedSpeeds`):
    a model's :meth:`SpeedBook.summary`, written and read; never raises."""

    async def publish(self, model: str, summary: dict[str, Any]) -> None: ...

    async def fetch(self, model: str) -> dict[str, Any] | None: ...


@dataclass(frozen=True)
class Speed:
    """One model's speeds in tokens per second (None: unknown) and where each came from
    (``timings``, ``answers``, a setting's name, or None); the mean tokens it wrote in a
    search round (``search_call_tokens``; None: it has made none the proxy saw)."""

    prefill_tps: float | None = None
    decode_tps: float | None = None
    prefill_source: str | None = None
    decode_source: str | None = None
    search_call_tokens: float | None = None

    @property
    def known(self) -> bool:
        return self.prefill_tps is not None and self.decode_tps is not None

    def shown(self) -> dict[str, Any]:
        """For ``/readyz`` and the decision log (rounded)."""
        return {
            "prefill_tokens_per_s": None if self.prefill_tps is None else round(self.prefill_tps, 1),
            "decode_tokens_per_s": None if self.decode_tps is None else round(self.decode_tps, 1),
            "prefill_source": self.prefill_source, "decode_source": self.decode_source,
            "search_call_tokens": None if self.search_call_tokens is None
            else round(self.search_call_tokens, 1),
        }


@dataclass
class _Throughput:
    """The last :data:`WINDOW` samples of one rate: (tokens, per) each, ``per`` the
    seconds they took (a speed) or the rounds they were written in (1: a search round's
    tokens)."""

    samples: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=WINDOW))
    source: str | None = None

    def add(self, tokens: float, seconds: float, source: str) -> None:
        if source != self.source:  # a better source replaces a worse one's samples
            if self.source == "timings" and source != "timings":
                return
            self.samples.clear()
            self.source = source
        self.samples.append((tokens, seconds))

    @property
    def value(self) -> float | None:
        seconds = sum(s for _, s in self.samples)
        return sum(t for t, _ in self.samples) / seconds if seconds > 0 else None

    def summary(self) -> list[Any] | None:
        """The window's total tokens, ``per`` and source (None: no sample)."""
        if not self.samples:
            return None
        return [sum(t for t, _ in self.samples), sum(s for _, s in self.samples), self.source]

    def adopt(self, summary: Any) -> None:
        """Another replica's window (:meth:`summary`), kept as one sample while this one
        has none of its own; an unreadable one is ignored."""
        if self.samples or not isinstance(summary, list) or len(summary) != 3:
            return
        tokens, seconds, source = summary
        if (_number(tokens) or 0) > 0 and (_number(seconds) or 0) > 0 and isinstance(source, str):
            self.samples.append((float(tokens), float(seconds)))
            self.source = f"{source} (shared)"


@dataclass
class RoundTiming:
    """One upstream round as seen by the proxy: when it was sent, when its first event
    (or its body) and its last arrived (monotonic seconds), and the ``timings`` and
    ``usage`` objects its answer carried (the last of each); ``search_round``: the answer
    was only the proxy's search or load calls (set once it is read)."""

    sent: float
    first: float | None = None
    last: float | None = None
    streamed: bool = False
    timings: Mapping[str, Any] | None = None
    usage: Mapping[str, Any] | None = None
    search_round: bool = False

    def seen(self, data: Mapping[str, Any], now: float, *, streamed: bool) -> None:
        """One answer object (a stream's event data, or the body) read at ``now``."""
        self.first = now if self.first is None else self.first
        self.last, self.streamed = now, streamed
        timings, usage = data.get("timings"), data.get("usage")
        if isinstance(timings, Mapping):
            self.timings = timings
        if isinstance(usage, Mapping):
            self.usage = usage
        message = data.get("message")  # Messages' message_start carries the input usage
        if isinstance(message, Mapping) and isinstance(message.get("usage"), Mapping):
            self.usage = {**message["usage"], **(self.usage or {})}
        response = data.get("response")  # Responses' terminal event carries the response
        if isinstance(response, Mapping) and isinstance(response.get("usage"), Mapping):
            self.usage = response["usage"]

    def seen_body(self, raw: bytes, now: float) -> None:
        """A plain answer's body, read whole at ``now`` (one that is no JSON object says
        nothing)."""
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return
        if isinstance(data, dict):
            self.seen(data, now, streamed=False)


def _number(value: Any) -> float | None:
    """``value`` as a finite number ≥ 0, else None (also an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def _first(mapping: Mapping[str, Any], *keys: str) -> float | None:
    for key in keys:
        if (value := _number(mapping.get(key))) is not None:
            return value
    return None


def _cached(usage: Mapping[str, Any]) -> float:
    for key in ("prompt_tokens_details", "input_tokens_details"):
        details = usage.get(key)
        if isinstance(details, Mapping) and (cached := _number(details.get("cached_tokens"))) is not None:
            return cached
    return _number(usage.get("cache_read_input_tokens")) or 0.0


@dataclass
class _Windows:
    """What is learned of one model: its prefill and decode speeds, and the tokens of its
    search rounds."""

    prefill: _Throughput = field(default_factory=_Throughput)
    decode: _Throughput = field(default_factory=_Throughput)
    search_call: _Throughput = field(default_factory=_Throughput)


class SpeedBook:
    """The speeds of each model the upstream serves (see the module docstring). Never
    raises on what a server sends."""

    def __init__(self, settings: Settings, share: SpeedShare | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._settings = settings
        self._models: dict[str, _Windows] = {}
        self._share = share
        self._clock = clock
        self._due: dict[tuple[str, str], float] = {}  # (publish | fetch, model) → next time
        self._tasks: set[asyncio.Task[None]] = set()

    def observe(self, model: str | None, timing: RoundTiming) -> None:
        """Learn from one round's answer (:class:`RoundTiming`), read to its end."""
        windows = self._windows(model or "")
        prefill, decode = windows.prefill, windows.decode
        timings, usage = timing.timings, timing.usage
        if timing.search_round:
            self._search_round(windows.search_call, timings, usage)
        if timings is not None:
            self._sample(prefill, _first(timings, "prompt_n"), _first(timings, "prompt_ms"),
                         MIN_PREFILL_TOKENS, MAX_PREFILL_TPS, "timings", 1000.0)
            self._sample(decode, _first(timings, "predicted_n"), _first(timings, "predicted_ms"),
                         1, MAX_DECODE_TPS, "timings", 1000.0)
            self._publish(model or "")
            return
        if usage is None or timing.first is None or timing.last is None:
            if timing.search_round:
                self._publish(model or "")
            return
        prompt = _first(usage, "prompt_tokens", "input_tokens")
        waited, streamed_s = timing.first - timing.sent, timing.last - timing.first
        if prompt is not None and waited >= MIN_TIMED_S:
            evaluated = max(prompt - _cached(usage), 0.0)
            self._sample(prefill, evaluated, waited, MIN_PREFILL_TOKENS, MAX_PREFILL_TPS,
                         "answers")
        generated = _first(usage, "completion_tokens", "output_tokens")
        if timing.streamed and generated is not None and streamed_s >= MIN_TIMED_S:
            self._sample(decode, generated - 1, streamed_s, MIN_DECODE_TOKENS, MAX_DECODE_TPS,
                         "answers")
        self._publish(model or "")

    def _search_round(self, into: _Throughput, timings: Mapping[str, Any] | None,
                      usage: Mapping[str, Any] | None) -> None:
        """One search round's generated tokens into ``into`` (a sample of one round):
        ``timings``' count, else ``usage``'s; none when neither says, says 0, or says more
        than :data:`MAX_ROUND_TOKENS`."""
        counted = _first(timings, "predicted_n") if timings is not None else None
        if counted is not None:
            self._sample(into, counted, 1.0, 1, MAX_ROUND_TOKENS, "timings")
        elif usage is not None:
            self._sample(into, _first(usage, "completion_tokens", "output_tokens"), 1.0, 1,
                         MAX_ROUND_TOKENS, "answers")

    def summary(self, model: str | None) -> dict[str, Any]:
        """``model``'s windows in short (what :class:`SpeedShare` keeps)."""
        windows = self._models.get(model or "") or _Windows()
        return {"prefill": windows.prefill.summary(), "decode": windows.decode.summary(),
                "search_call": windows.search_call.summary()}

    def _due_now(self, action: str, model: str) -> bool:
        now = self._clock()
        if now < self._due.get((action, model), 0.0):
            return False
        self._due[(action, model)] = now + SHARE_INTERVAL_S
        return True

    def _publish(self, model: str) -> None:
        """Write ``model``'s speeds to the share in the background, at most every
        :data:`SHARE_INTERVAL_S`."""
        if self._share is None or not self._due_now("publish", model):
            return
        task = asyncio.get_running_loop().create_task(self._share.publish(model, self.summary(model)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def known(self, model: str | None) -> Speed:
        """:meth:`speed`, after reading another replica's where this one has learned
        nothing of ``model`` (at most every :data:`SHARE_INTERVAL_S`)."""
        key = model or ""
        if self._share is not None and key not in self._models and self._due_now("fetch", key):
            shared = await self._share.fetch(key)
            if shared is not None and key not in self._models:
                windows = self._windows(key)
                windows.prefill.adopt(shared.get("prefill"))
                windows.decode.adopt(shared.get("decode"))
                windows.search_call.adopt(shared.get("search_call"))
        return self.speed(model)

    @staticmethod
    def _sample(into: _Throughput, tokens: float | None, spent: float | None, least: int,
                fastest: float, source: str, per_second: float = 1.0) -> None:
        """Add ``tokens`` in ``spent`` (÷ ``per_second``: seconds, or the rounds they were
        written in) to ``into``, unless fewer than ``least`` tokens, no time, or more than
        ``fastest`` tokens a second (a round)."""
        if tokens is None or spent is None or tokens < least or spent <= 0:
            return
        seconds = spent / per_second
        if tokens / seconds > fastest:
            return
        into.add(tokens, seconds, source)

    def _windows(self, model: str) -> _Windows:
        windows = self._models.pop(model, None) or _Windows()
        self._models[model] = windows  # most recently used last
        while len(self._models) > MAX_MODELS:
            self._models.pop(next(iter(self._models)))
        return windows

    def speed(self, model: str | None) -> Speed:
        """``model``'s speeds: learned, else the settings' (a server that serves one model
        whatever a request names is learned under every name it is asked by)."""
        windows = self._models.get(model or "")
        prefill, decode = (windows.prefill, windows.decode) if windows else (None, None)
        settings = self._settings
        prefill_tps = prefill.value if prefill is not None else None
        decode_tps = decode.value if decode is not None else None
        return Speed(
            prefill_tps if prefill_tps is not None else settings.prefill_tokens_per_s,
            decode_tps if decode_tps is not None else settings.decode_tokens_per_s,
            prefill.source if prefill_tps is not None and prefill is not None
            else "TOOLPRUNE_PREFILL_TOKENS_PER_S" if settings.prefill_tokens_per_s else None,
            decode.source if decode_tps is not None and decode is not None
            else "TOOLPRUNE_DECODE_TOKENS_PER_S" if settings.decode_tokens_per_s else None,
            windows.search_call.value if windows else None,
        )

    def shown(self) -> dict[str, Any]:
        """Every model's speeds, for ``/readyz``."""
        return {name or "(any)": self.speed(name).shown() for name in self._models}
