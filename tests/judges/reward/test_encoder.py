"""The sentence encoder and its on-disk cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from django.conf import LazySettings

from judges.reward import encoder
from judges.reward.encoder import DEFAULT_BACKBONE, BackboneNotFound, embed, embed_texts


def test_embeddings_are_unit_rows_of_float32_in_input_order(reward_dirs: Path) -> None:
    texts = ["How do I boil an egg?", "Put it in boiling water for eight minutes.", "Paris"]
    vectors = embed_texts(texts)
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # The question is closer to its answer than to an unrelated word.
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
    np.testing.assert_allclose(embed_texts([texts[2], texts[0]]), vectors[[2, 0]], atol=1e-6)


def test_a_text_seen_before_is_read_from_the_cache_not_encoded_again(
    settings: LazySettings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.CONCORD_REWARD_CACHE_DIR = tmp_path / "cache"
    first = embed(["an answer", "another answer", "an answer"])
    assert (first.encoded, first.cached) == (2, 0)
    encoded: list[list[str]] = []
    real = encoder.encode_uncached

    def spy(texts: list[str], *, backbone: str = DEFAULT_BACKBONE) -> np.ndarray:
        encoded.append(list(texts))
        return real(texts, backbone=backbone)

    monkeypatch.setattr(encoder, "encode_uncached", spy)
    again = embed(["another answer", "a new answer", "an answer"])
    assert encoded == [["a new answer"]]
    assert (again.encoded, again.cached) == (1, 2)
    np.testing.assert_array_equal(again.vectors[0], first.vectors[1])
    assert len(list((tmp_path / "cache").rglob("*.npy"))) == 3


def test_texts_longer_than_the_window_are_counted_as_truncated(
    settings: LazySettings, tmp_path: Path
) -> None:
    settings.CONCORD_REWARD_CACHE_DIR = tmp_path / "cache"
    window = encoder.encoder_window()
    result = embed(["short", "word " * (window + 10)])
    assert result.truncated == 1


def test_an_unknown_backbone_is_named_in_the_error(tmp_path: Path) -> None:
    with pytest.raises(BackboneNotFound, match="no-such-model"):
        embed_texts(["x"], backbone=str(tmp_path / "no-such-model"))
    (tmp_path / "classifier").mkdir()
    with pytest.raises(BackboneNotFound, match="no modules.json"):
        embed_texts(["x"], backbone=str(tmp_path / "classifier"))
