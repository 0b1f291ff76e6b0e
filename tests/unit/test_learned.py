"""selection.learning.learned: learning a state from evidence, its serialised form, binding it to a
catalogue, the boost and the centring it gives, and the ``learned`` reason."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import numpy as np
import pytest

from selection.catalog.catalog import parse_tools
from selection.catalog.policy import Policy
from selection.choosing.selector import TurnFacts, select
from selection.choosing.state import ConversationState
from selection.learning.learned import (
    FORMAT,
    GAIN,
    PER_TOOL,
    Evidence,
    LearnedIndex,
    LearnedStateError,
    decode_state,
    encode_state,
    learn,
    learned_names,
)
from selection.learning.states import LearnedStates
from tests.support.selection import ranked


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def catalog_of(*names: str):
    return parse_tools([{"type": "function", "function": {"name": n, "description": n}} for n in names])


def pair(tool: str, vector: np.ndarray, status: str = "loaded", request: str = "r", ts: float = 0.0) -> Evidence:
    return Evidence(request, "c-" + request, tool, status, vector, ts)


def test_learn_merges_near_duplicates_and_weights_by_status() -> None:
    a, b = unit(1, 0, 0), unit(0, 1, 0)
    state = learn(
        [pair("t1", a, "loaded"), pair("t1", unit(1, 0.01, 0), "forwarded"), pair("t1", b, "miss"),
         pair("t2", b, "forwarded"), pair("t3", a, "history")],
        catalog="fp", embedder="e", version=1, created=5.0,
    )
    assert state.tools == ("t1", "t1", "t2")  # history calls are no evidence
    assert state.weights.tolist() == [1.5, 1.0, 0.5]  # merged 1.0 + 0.5 first
    assert state.vectors.dtype == np.float16
    assert state.evidence == {"loaded": 1, "forwarded": 2, "miss": 1}


def test_learn_keeps_the_heaviest_vectors_per_tool() -> None:
    rng = np.random.default_rng(0)
    pairs = [pair("t", unit(*rng.normal(size=64)), "forwarded", str(i)) for i in range(PER_TOOL + 8)]
    pairs.append(pair("t", unit(*rng.normal(size=64)), "miss", "heavy"))
    state = learn(pairs, catalog="fp", embedder="e", version=1, created=0.0)
    assert len(state.tools) == PER_TOOL
    assert state.weights[0] == 1.0  # the miss survives the cut


def test_the_boost_is_the_calibrated_chance_of_the_whole_query() -> None:
    # One request: nothing observed but itself, so the chance is the cosine.
    state = learn([pair("b", unit(1, 0))], catalog="fp", embedder="e", version=1, created=0.0)
    bound = LearnedIndex.bind(state, catalog_of("a", "b"))
    near = bound.boost(unit(1, 0).reshape(1, -1))
    half = bound.boost(unit(1, 1).reshape(1, -1))
    far = bound.boost(unit(0, 1).reshape(1, -1))
    assert near[0] == 0 and near[1] == pytest.approx(GAIN, abs=1e-3)
    assert half[1] == pytest.approx(GAIN * np.sqrt(0.5), abs=0.03)
    assert far.tolist() == [0.0, 0.0]
    # the whole query (the first part) is matched: evidence vectors are whole queries
    whole_far = bound.boost(np.vstack([unit(0, 1), unit(1, 0)]))
    assert whole_far.tolist() == [0.0, 0.0]


def test_evidence_as_alike_as_unrelated_requests_of_the_traffic_gives_nothing() -> None:
    # Pairs of requests at cosine 0.6 that never share a tool: a new request that alike
    # to one of them gains nothing from its tool; a repeat of a request gains fully.
    traffic = []
    for i in range(6):
        base = np.zeros(16, dtype=np.float32)
        base[2 * i] = 1.0
        other = base.copy()
        other[2 * i], other[2 * i + 1] = 0.6, 0.8
        traffic += [pair(f"t{i}", base, request=f"r{i}"), pair(f"u{i}", other, request=f"s{i}")]
    state = learn(traffic, catalog="fp", embedder="e", version=1, created=0.0)
    bound = LearnedIndex.bind(state, catalog_of("t0", "u0"))
    alike = np.zeros((1, 16), dtype=np.float32)
    alike[0, 0], alike[0, 1] = 0.6, 0.8
    assert bound.boost(alike)[0] == 0.0  # t0's request is at 0.6: nothing
    assert bound.boost(alike)[1] == pytest.approx(GAIN, abs=1e-3)  # u0's own request again


def test_round_trip_and_bad_bytes() -> None:
    state = learn([pair("b", unit(1, 0, 0))], catalog="fp", embedder="e", version=3, created=1.0,
                  measured={"before": 0.5, "after": 0.75})
    raw = encode_state(state)
    again = decode_state(raw, catalog="fp", embedder="e")
    assert again.tools == state.tools and again.version == 3
    assert np.array_equal(again.vectors, state.vectors)
    assert again.measured == {"before": 0.5, "after": 0.75}
    with pytest.raises(LearnedStateError, match="another catalogue"):
        decode_state(raw, catalog="other")
    with pytest.raises(LearnedStateError, match="another embedder"):
        decode_state(raw, embedder="other")
    with pytest.raises(LearnedStateError, match="unreadable"):
        decode_state(raw[: len(raw) // 2])
    with pytest.raises(LearnedStateError):
        decode_state(b"not an archive at all")


def test_binding_drops_tools_the_catalogue_no_longer_has() -> None:
    state = learn([pair("gone", unit(1, 0)), pair("kept", unit(0, 1))],
                  catalog="fp", embedder="e", version=1, created=0.0)
    bound = LearnedIndex.bind(state, catalog_of("kept", "renamed_gone"))
    assert bound.dropped == ("gone",)
    boost = bound.boost(unit(1, 0).reshape(1, -1))
    assert boost.tolist() == [0.0, 0.0]  # the renamed tool is not guessed


def test_states_are_per_catalogue_and_embedder() -> None:
    states = LearnedStates("e")
    catalog = catalog_of("a", "b")
    state = learn([pair("b", unit(1, 0))], catalog=catalog.fingerprint, embedder="e",
                  version=1, created=0.0)
    states.install(state)
    assert states.bound(catalog) is states.bound(catalog)  # bound once
    assert states.bound(catalog_of("a", "b", "c")) is None
    with pytest.raises(LearnedStateError):
        states.install(learn([], catalog="x", embedder="other", version=1, created=0.0))


def test_a_tool_admitted_only_thanks_to_its_boost_has_reason_learned() -> None:
    catalog = catalog_of("a", "b", "c")
    plain = np.asarray([0.9, 0.5, 0.4], dtype=np.float32)
    boost = np.asarray([0.0, 0.0, 0.6], dtype=np.float32)
    assert learned_names(catalog, plain + boost, boost, ["a", "c"], 1) == {"c"}
    assert learned_names(catalog, plain + boost, boost, ["a", "c"], 3) == set()
    policy = Policy(top_k=1, min_catalog_tools=0, threshold=0.0)
    chosen = select(catalog, ranked(plain + boost, boost=boost), policy, ConversationState(), TurnFacts(now=0.0))
    reasons = {tool.name: tool.reason for tool in chosen.tools}
    assert reasons.get("c") == "learned"


def test_centering_takes_the_traffic_mean_off_the_query() -> None:
    traffic = [pair("t", unit(1, 1, 0), request="r1"), pair("t", unit(1, -1, 0), request="r2")]
    state = learn(traffic, catalog="fp", embedder="e", version=1, created=0.0, centering=1.0)
    assert np.allclose(state.center.astype(np.float32), [np.sqrt(0.5), 0, 0], atol=1e-3)
    bound = LearnedIndex.bind(state, catalog_of("t"))
    centred = bound.center(np.vstack([unit(1, 1, 0)]))
    assert np.allclose(centred, [[0, 1, 0]], atol=1e-3)  # the shared direction is gone
    plain = LearnedIndex.bind(replace(state, centering=0.0), catalog_of("t"))
    query = np.vstack([unit(1, 1, 0)])
    assert plain.center(query) is query


def test_gain_scales_the_boost_and_zero_learns_no_vectors() -> None:
    evidence = [pair("b", unit(1, 0))]
    query = np.vstack([unit(1, 0)])
    boosts = [
        LearnedIndex.bind(learn(evidence, catalog="fp", embedder="e", version=1, created=0.0,
                                gain=gain), catalog_of("a", "b")).boost(query)[1]
        for gain in (0.0, 1.0, 2.0)
    ]
    assert boosts[0] == 0.0 and boosts[2] == pytest.approx(2 * boosts[1]) and boosts[1] > 0
    assert learn(evidence, catalog="fp", embedder="e", version=1, created=0.0, gain=0.0).tools == ()


def test_gain_and_centering_survive_the_serialised_form() -> None:
    state = learn([pair("t", unit(1, 2, 3))], catalog="fp", embedder="e", version=1,
                  created=0.0, gain=0.5, centering=0.5)
    again = decode_state(encode_state(state))
    assert (again.gain, again.centering) == (0.5, 0.5)
    assert np.array_equal(again.center, state.center)


def test_the_calibration_survives_the_serialised_form_and_older_states_are_foreign() -> None:
    traffic = [pair("t", unit(1, i, 0), request=str(i)) for i in range(4)]
    state = learn(traffic, catalog="fp", embedder="e", version=1, created=0.0)
    assert np.array_equal(decode_state(encode_state(state)).calibration, state.calibration)
    buffer = io.BytesIO()  # a state of the format before the calibration (a floor instead)
    header = json.loads(bytes(np.load(io.BytesIO(encode_state(state)))["header"]).decode())
    header.update(format="toolprune-learned/1", floor=0.3)
    np.savez(buffer, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
             vectors=state.vectors, weights=state.weights)
    assert header["format"] != FORMAT
    with pytest.raises(LearnedStateError, match="of this version"):
        decode_state(buffer.getvalue())
