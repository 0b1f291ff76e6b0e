"""Batches of texts for a transformer run, by their token counts: every text of a batch
is padded to the batch's longest, and attention and matrix products cost by padded token,
so batches group similar lengths and stay small. Pure functions, no I/O."""

from __future__ import annotations

from collections.abc import Sequence

#: Padded tokens per ONNX run at most (one text longer than that runs alone). Runs of
#: about 256 tokens took the least CPU a token: the 117 GitHub tools' 233 texts (15,263
#: tokens) in 5.95 s of CPU against 8.36 s in batches of 8 by characters, and 6.37 s one by
#: one (one loaded core; ``benchmarks/cold_start.py``).
BATCH_TOKENS = 256


def token_batches(lengths: Sequence[int], max_texts: int, max_tokens: int = BATCH_TOKENS) -> list[list[int]]:
    """Indices of texts whose token counts are ``lengths`` in batches, shortest first, of
    at most ``max_texts`` texts and ``max_tokens`` tokens once padded to the batch's
    longest (a text over ``max_tokens`` alone): little padding, and no large batch of
    long texts (slower a token than several small ones)."""
    batches: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        batch = batches[-1] if batches else None
        if batch is None or len(batch) >= max_texts or (len(batch) + 1) * lengths[i] > max_tokens:
            batches.append([i])
        else:
            batch.append(i)
    return batches
