"""What a method costs beside the run's own encoder pass, measured instead of declared.

A method's footprint is what the grid's cost and memory estimates need to know of it: the encoder
rows it computes per sentence in one step, with gradient (each keeps its activations until the
backward) and without (a forward only: a momentum key encoder, a frozen complementary model), the
whole encoder copies it holds (trained: with gradients and AdamW's two moments; frozen: weights
only), and the trainable parameters it builds itself (heads, projectors, predictors).

:func:`footprint` measures all of it once per (method, parameters, width): it builds the method,
binds it to a small stand-in encoder of that width (one transformer layer, the packaged tokenizer;
a second model the method asks for is another copy of it) and runs one loss on a few sentences,
counting the rows of every encoder call. Rows per sentence do not depend on the encoder's depth or
the batch, and copies are counted as modules, so the stand-in gives what the run's encoder would.

A grid's dry run needs the footprints of all its runs (64 distinct ones for ``all --profile paper``,
seconds of CPU): :class:`FootprintCache` keeps them in ``<runs>/footprint_cache/``, keyed by the
source of the code that measures them (:data:`CODE_DIRS`), so a changed method is measured again.
The footprints of every run of ``all`` under the ``paper`` and ``cpu`` profiles also ship with the
code (:data:`SHIPPED`), so a first dry run measures none of them;
``tests/run/test_footprint_table.py`` measures each again and fails when one changed (``make
footprints`` writes the file anew).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch
from torch import nn

from harness.atomic import WriteError, write_json
from harness.config.models import load_tokenizer, packaged_model_dir
from harness.encoder.calls import EmbeddingEdit
from harness.encoder.model import SentenceEncoder
from harness.encoder.training_encode import TrainingEncode
from methods import get_method
from methods.params import MethodParams

SENTENCES = (
    "a man is playing a guitar on the stage .",
    "two dogs run through the snow .",
    "the woman slices a tomato in the kitchen .",
    "children are playing soccer in the park .",
)
"""The stand-in batch: four sentences with words a masking method can mask."""


@dataclass(frozen=True)
class Footprint:
    """What one step of a method holds beside the run's encoder (see the module docstring).

    Attributes:
        rows: encoder rows with gradient per corpus sentence (SimCSE: 2, its two dropout views).
        no_grad_rows: encoder rows without gradient per corpus sentence.
        trained_copies: whole encoder copies the method trains (CT's model 1).
        frozen_copies: whole encoder copies it holds frozen (a momentum key encoder).
        own_parameters: trainable parameters it builds itself, encoder copies left out.
    """

    rows: float
    no_grad_rows: float
    trained_copies: int
    frozen_copies: int
    own_parameters: int


class _CountingEncode(TrainingEncode):
    """The loop's encode, counting the rows of every call with and without gradient."""

    def __init__(self, encoder: SentenceEncoder) -> None:
        super().__init__(encoder)
        self.rows = 0
        self.no_grad_rows = 0

    def _call(
        self,
        batch: dict[str, torch.Tensor],
        dropout: bool | float,
        encoder: nn.Module | None,
        embeddings: EmbeddingEdit | None,
        tokens: bool,
    ) -> torch.Tensor:
        out = super()._call(batch, dropout, encoder, embeddings, tokens)
        n = int(batch["attention_mask"].shape[0])
        if out.requires_grad:
            self.rows += n
        else:
            self.no_grad_rows += n
        return out


_M = TypeVar("_M", bound=nn.Module)


@functools.lru_cache(maxsize=8)
def stand_in_encoder(hidden_size: int) -> SentenceEncoder:
    """A one-layer BERT of this width with the packaged tokenizer (random weights, fixed seed)."""
    from transformers import BertConfig, BertModel

    tokenizer = load_tokenizer(str(packaged_model_dir()))
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=1,
        num_attention_heads=1,
        intermediate_size=16,
        max_position_embeddings=64,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = BertModel(config)
    return SentenceEncoder(model, tokenizer, f"stand-in (d={hidden_size})")


def _shared_copy(module: _M) -> _M:
    """A copy of ``module`` whose parameters are new objects over the same storage, sharing its
    tokenizer: the measurement runs one loss and no update, and cloning the stand-in's 30k-word
    embeddings, then copying the tokenizer's vocabulary, cost most of it."""
    memo: dict[int, Any] = {
        id(p): nn.Parameter(p.detach(), requires_grad=p.requires_grad) for p in module.parameters()
    }
    for encoder in module.modules():  # tokenizers are read, never changed: shared, not copied
        tokenizer = getattr(encoder, "tokenizer", None)
        if tokenizer is not None:
            memo[id(tokenizer)] = tokenizer
    return copy.deepcopy(module, memo)


@contextlib.contextmanager
def _own_random_state() -> Iterator[None]:
    """Leave Python's, NumPy's and torch's generators as they were (a measurement draws from them)."""
    py, npy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npy)


@functools.lru_cache(maxsize=1024)
def footprint(method: str, params: MethodParams, hidden_size: int) -> Footprint:
    """Measure ``method``'s footprint at ``params`` on an encoder of ``hidden_size`` (cached).

    ``params`` must suit the width (the run's resolution checked them against it).
    """
    stand_in = stand_in_encoder(hidden_size)
    with _own_random_state():
        encoder = _shared_copy(stand_in).train()
        built = get_method(method)(params, hidden_size)
        built.bind(encoder, lambda _name: _shared_copy(stand_in))
        copies = [m for m in built.modules() if isinstance(m, SentenceEncoder)]
        in_copies = {id(p) for c in copies for p in c.parameters()}
        trained = sum(1 for c in copies if any(p.requires_grad for p in c.parameters()))
        own = sum(
            p.numel() for p in built.trainable_parameters() if p.requires_grad and id(p) not in in_copies
        )
        encode = _CountingEncode(encoder)
        batch = encoder.tokenize(list(SENTENCES), max_length=32)
        built.compute_loss(encode, batch, step=1)
    b = len(SENTENCES)
    return Footprint(
        rows=encode.rows / b,
        no_grad_rows=encode.no_grad_rows / b,
        trained_copies=trained,
        frozen_copies=len(copies) - trained,
        own_parameters=int(own),
    )


SHIPPED = Path(__file__).with_name("footprints.json")
"""Footprints of the ``paper`` and ``cpu`` profiles' runs, measured by :func:`footprint` and kept
with the code (see the module notes)."""


def footprint_key(method: str, params: MethodParams, hidden_size: int) -> str:
    """The key of one footprint in :data:`SHIPPED` and in a runs folder's cache."""
    return f"{method}|{params!r}|{hidden_size}"


@functools.cache
def shipped() -> dict[str, Footprint]:
    """:data:`SHIPPED`'s footprints by :func:`footprint_key` (none where the file is unreadable)."""
    try:
        data = json.loads(SHIPPED.read_text(encoding="utf-8"))
        return {key: Footprint(**value) for key, value in data.items()}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


CODE_DIRS = ("methods", "harness/encoder", "harness/run/footprint.py")
"""Sources (under the repository root) whose text enters :class:`FootprintCache`'s key: the methods,
the encoder calls they count through, and this measurement."""
CACHE_DIR = "footprint_cache"
"""Folder of the cache inside a runs folder."""


@functools.cache
def code_digest() -> str:
    """sha256 of the sources in :data:`CODE_DIRS` (read once per process)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for name in CODE_DIRS:
        path = root / name
        for file in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            h.update(str(file.relative_to(root)).encode())
            h.update(file.read_bytes())
    return h.hexdigest()


class FootprintCache:
    """Footprints measured earlier for a runs folder: one JSON file per :func:`code_digest`.

    :meth:`get` measures what is not there; :meth:`save` writes the file when something was
    measured (a runs folder that is missing or cannot be written keeps no cache: the next dry run
    measures again).
    """

    def __init__(self, runs_dir: str | Path) -> None:
        self.path = Path(runs_dir) / CACHE_DIR / f"{code_digest()[:32]}.json"
        self.entries: dict[str, dict[str, Any]] = {}
        self.added = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            data = None
        if isinstance(data, dict):
            self.entries = {k: v for k, v in data.items() if isinstance(v, dict)}

    def get(self, method: str, params: MethodParams, hidden_size: int) -> Footprint:
        key = footprint_key(method, params, hidden_size)
        entry = self.entries.get(key)
        if entry is not None:
            try:
                return Footprint(**entry)
            except TypeError:  # another field set (a changed Footprint): measured again
                pass
        if key in shipped():
            return shipped()[key]
        measured = footprint(method, params, hidden_size)
        self.entries[key] = dataclasses.asdict(measured)
        self.added = True
        return measured

    def save(self) -> None:
        """Write what was measured, into a runs folder that exists (a dry run creates none)."""
        if self.added and self.path.parents[1].is_dir():
            with contextlib.suppress(WriteError):
                write_json(self.path, self.entries, indent=1, sort_keys=True)
            self.added = False
