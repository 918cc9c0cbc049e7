"""retrieve/fusion: two ranked arms (vector, BM25) -> one score per chunk id.

What a user would notice: a chunk only one arm found still ranks (LanceDB's own hybrid reranker dropped those), a
chunk both arms like beats one that only one arm likes, and the vector weight decides which arm wins a tie-break.
That search really feeds both arms under the same ids is tested on a real index in tests/test_search.py.
"""

from __future__ import annotations

from localidx.retrieve import fusion


def _ranked(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=lambda key: -scores[key])


def test_fusion_arithmetic():
    assert fusion.normalize({"a": 7.0}) == {"a": 1.0}  # a single hit is the best hit
    assert fusion.normalize({"a": 3.0, "b": 1.0, "c": 2.0}) == {"a": 1.0, "b": 0.0, "c": 0.5}
    fused = fusion.linear({"a": 1.0, "b": 0.5}, {"b": 1.0, "c": 1.0}, vector_weight=0.25)
    assert fused == {"a": 0.25, "b": 0.875, "c": 0.75}  # a missing arm counts 0, the union is kept
    assert fusion.rrf(["a", "b"], ["b"]) == {"a": 1 / 61, "b": 1 / 62 + 1 / 61}


def test_normalising_keeps_each_arms_order_whatever_its_scale():
    bm25_raw = {"x": 14.2, "y": 3.1, "z": 9.0}  # BM25 scores are unbounded
    vector_raw = {"x": 0.31, "y": 0.30, "z": 0.05}  # cosine similarities are close together
    for raw in (bm25_raw, vector_raw):
        normal = fusion.normalize(raw)
        assert _ranked(normal) == _ranked(raw)
        assert (min(normal.values()), max(normal.values())) == (0.0, 1.0)
    assert fusion.normalize({}) == {}
    assert fusion.normalize({"a": 2.0, "b": 2.0}) == {"a": 1.0, "b": 1.0}  # all equal: all best


def test_a_chunk_found_by_one_arm_only_keeps_its_place():
    vector = fusion.normalize({"both": 0.9, "vector-only": 0.8, "weak": 0.1})
    bm25 = fusion.normalize({"both": 12.0, "bm25-only": 11.0, "weak": 1.0})
    fused = fusion.linear(vector, bm25, vector_weight=0.5)
    assert set(fused) == {"both", "vector-only", "bm25-only", "weak"}
    assert _ranked(fused)[0] == "both"
    assert fused["bm25-only"] > fused["weak"] and fused["vector-only"] > fused["weak"]
    ranked = _ranked(fusion.rrf(_ranked(vector), _ranked(bm25)))
    assert ranked[0] == "both" and {"vector-only", "bm25-only"} <= set(ranked)


def test_the_vector_weight_decides_which_arm_wins():
    vector = {"semantic": 1.0, "literal": 0.2}
    bm25 = {"semantic": 0.1, "literal": 1.0}
    assert _ranked(fusion.linear(vector, bm25, vector_weight=0.8))[0] == "semantic"
    assert _ranked(fusion.linear(vector, bm25, vector_weight=0.2))[0] == "literal"
    assert fusion.linear(vector, bm25, vector_weight=1.0) == vector  # one arm alone is that arm's ranking


def test_rrf_reads_ranks_not_scores_and_rewards_agreement():
    # Second in both lists beats first in one list only.
    fused = fusion.rrf(["a", "b", "c"], ["d", "b", "e"])
    assert _ranked(fused)[0] == "b"
    # The head is damped: the gap between ranks 1 and 2 is small next to the score of being in a list at all.
    one_list = fusion.rrf(["first", "second"])
    assert one_list["first"] - one_list["second"] < one_list["second"] / 50
    assert fusion.rrf(["a", "b"], k=1) == {"a": 1 / 2, "b": 1 / 3}
