"""NumPy arrays stored in a bytea column, losslessly: the `.npy` format (dtype and shape in its
header, then the data), read back without pickle. No model code here: the report imports it."""

from __future__ import annotations

import io

import numpy as np


def array_bytes(array: np.ndarray) -> bytes:
    """The array as `.npy` bytes, restored exactly (dtype, shape, every bit) by
    :func:`array_from_bytes`."""
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(array), allow_pickle=False)
    return buffer.getvalue()


def array_from_bytes(data: bytes | memoryview) -> np.ndarray:
    """The array that :func:`array_bytes` wrote."""
    loaded: np.ndarray = np.load(io.BytesIO(bytes(data)), allow_pickle=False)
    return loaded
