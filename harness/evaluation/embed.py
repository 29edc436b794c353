"""What evaluation asks of an encoder: a function from sentences to embeddings, and one to lengths."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

EmbedFn = Callable[[list[str]], np.ndarray]
"""``embed(sentences) -> [n, d]`` float32 embeddings of exactly these sentences, in their order."""
LengthsFn = Callable[[list[str]], Sequence[int]]
"""``lengths(sentences)``: each sentence's token count, so evaluation batches by token length."""
