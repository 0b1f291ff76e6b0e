"""What a request costs in seconds on the hardware people run a local model server on:
published single-stream speeds of 7–9B Q4 models, one :class:`Profile` per hardware
class (:data:`PROFILES`), and the arithmetic of a request's seconds.

A request costs its evaluated prompt tokens (llama-server's ``timings.prompt_n``: the
prompt less what its cache served) at the profile's prefill speed, plus the tokens the
model generates (``timings.predicted_n``) at its decode speed, plus
:data:`PER_REQUEST_S` (HTTP, scheduling, sampling set-up)::

    seconds = evaluated / prefill_tps + generated / decode_tps + PER_REQUEST_S

The client's first token of an answer comes after the prompt's prefill
(:func:`first_token_seconds`; the fixed cost included). All speeds are tokens per second.

Prefill falls with the depth of the context (ggml-org/llama.cpp pull request 28102: at a
32k-token depth 0.34–0.39× of the speed at 4k on the GPUs measured there); each profile's
prefill is the published figure for a deep prompt (8k tokens, or 1k–32k on the NPU)
where there is one, else the 512-token figure lowered for depth; decode is the
published figure. Sources, as published:

* ``datacenter-gpu``: H100 PCIe, llama.cpp CUDA, Llama-2-7B Q4_0: pp512 4,869, tg 134
  (XiongjieDai/GPU-Benchmarks-on-LLM-Inference, December 2023); prefill lowered to
  3,500 for a deep context.
* ``consumer-gpu``: RTX 4090, llama.cpp CUDA, Llama-3-8B Q4_K_M: pp512 7,139, an
  8k-token prompt 4,040, tg 131 (XiongjieDai/GPU-Benchmarks-on-LLM-Inference, May
  2024); prefill 3,000.
* ``apple-m3-max``: M3 Max, llama.cpp Metal, Llama-3-8B Q4_K_M: pp512 693, an 8k-token
  prompt 505, tg 49 (XiongjieDai/GPU-Benchmarks-on-LLM-Inference, May 2024).
* ``ryzen-ai-igpu``: Ryzen AI 9 HX 370's Radeon 890M, llama.cpp Vulkan, Qwen3-4B
  Q4_K_M: prefill 273, decode 16 (a r/LocalLLaMA post of 2026-03-31).
* ``ryzen-ai-npu``: Ryzen AI NPU (Kraken Point), FastFlowLM (Lemonade's ``flm``),
  Llama-3.1-8B: prefill 403 at a 1k-token prompt falling to 281 at 32k, decode 12.8
  falling to 8.5 (FastFlowLM's documented benchmarks, v0.9.30); 300 and 10.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: The fixed cost of one request to the model server (seconds).
PER_REQUEST_S = 0.05


@dataclass(frozen=True)
class Profile:
    """One hardware class: its ``name`` (a command-line word), the ``hardware`` and
    server it was measured on, single-stream ``prefill_tps`` and ``decode_tps``
    (tokens/s) and where the figures come from (``source``)."""

    name: str
    hardware: str
    prefill_tps: float
    decode_tps: float
    source: str


PROFILES: tuple[Profile, ...] = (
    Profile("datacenter-gpu", "H100 PCIe, llama.cpp CUDA, 8B Q4", 3500, 134,
            "XiongjieDai/GPU-Benchmarks-on-LLM-Inference (Dec 2023: pp512 4,869, tg 134); "
            "prefill lowered for depth"),
    Profile("consumer-gpu", "RTX 4090, llama.cpp CUDA, 8B Q4_K_M", 3000, 131,
            "XiongjieDai/GPU-Benchmarks-on-LLM-Inference (May 2024: pp512 7,139, 8k 4,040, "
            "tg 131)"),
    Profile("apple-m3-max", "M3 Max, llama.cpp Metal, 8B Q4_K_M", 505, 49,
            "XiongjieDai/GPU-Benchmarks-on-LLM-Inference (May 2024: pp512 693, 8k 505, tg 49)"),
    Profile("ryzen-ai-igpu", "Ryzen AI 9 HX 370 (890M), llama.cpp Vulkan, Qwen3-4B Q4_K_M",
            273, 16, "r/LocalLLaMA post, 2026-03-31"),
    Profile("ryzen-ai-npu", "Ryzen AI NPU (Kraken Point), FastFlowLM, Llama-3.1-8B", 300, 10,
            "FastFlowLM docs benchmarks v0.9.30 (prefill 403 at 1k → 281 at 32k; decode "
            "12.8 → 8.5)"),
)


def profile_named(name: str) -> Profile:
    """The profile called ``name``; ``KeyError`` naming the known ones otherwise."""
    for profile in PROFILES:
        if profile.name == name:
            return profile
    raise KeyError(f"no hardware profile {name!r}; known: {', '.join(p.name for p in PROFILES)}")


def profiles_chosen(words: str) -> list[Profile]:
    """``all``, ``none`` or comma-separated profile names, as profiles."""
    if words == "all":
        return list(PROFILES)
    if words in ("", "none"):
        return []
    return [profile_named(word.strip()) for word in words.split(",") if word.strip()]


def request_seconds(evaluated: int, generated: int, profile: Profile) -> float:
    """One request's seconds on ``profile`` (module docstring)."""
    return evaluated / profile.prefill_tps + generated / profile.decode_tps + PER_REQUEST_S


def first_token_seconds(evaluated: int, profile: Profile) -> float:
    """Seconds from a request to its answer's first token on ``profile``: its fixed cost
    and its prompt's prefill."""
    return evaluated / profile.prefill_tps + PER_REQUEST_S


def names(profiles: Sequence[Profile]) -> list[str]:
    return [profile.name for profile in profiles]
