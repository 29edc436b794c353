"""PromptBERT (unsupervised): the [MASK] state of a prompt template, with template denoising.

Jiang et al., "PromptBERT: Improving BERT Sentence Embeddings with Prompts", EMNLP 2022;
released code: https://github.com/kongds/Prompt-BERT (``prompt_bert/models.py`` ``cl_forward``;
``train.py``: the template's parsing and ``prepare_features``; ``evaluation.py``'s ``batcher``;
``run.sh``, case ``unsup-bert``). docs/baselines.md lists where each value comes from.

A template such as ``*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*`` (the released
notation: ``_`` is a space, ``*sent_0*`` the sentence, ``*mask*`` the tokenizer's mask token) is cut
at the sentence into a prefix and a suffix, as ``train.py`` does. One training step, ``B`` sentences
of token ids ``s_i`` (the loop's batch, special tokens stripped):

1. Two views of every sentence in two templates (``template``, ``template2``): the rows
   ``[CLS] prefix_t s_i suffix_t [SEP]``, all 2B in one encoder call with dropout; ``h_t,i`` is the
   last layer's state at the row's [MASK].
2. Template denoising (``denoise``, the code's ``--mask_embedding_sentence_delta``): for every
   sentence length ``c`` of the batch, the template alone ``[CLS] prefix_t suffix_t [SEP]`` with the
   positions of ``suffix_t [SEP]`` moved on by ``c`` (where they sit around a sentence of ``c``
   tokens), in the same call, with dropout and WITH gradient (``get_delta``); its [MASK] state
   ``delta_t(c)`` is subtracted: ``z_t,i = h_t,i - delta_t(|s_i|)``. The code encodes the template
   alone once per length (50 rows per template a step); here each sentence gets its own
   template-only row (the same function; with dropout, sentences of one length do not share one
   mask), so that a step encodes 4 rows per sentence whatever the batch's lengths.
3. ``loss = InfoNCE(mlp(z_1), mlp(z_2))`` at ``temperature``, in-batch negatives; the MLP (Linear +
   Tanh) in training only (``--mlp_only_train``).

The sentence embedding (dev evaluations, final tasks): the [MASK] state of ``template`` around the
sentence in eval mode, with no denoising and no MLP, and a full stop added to a sentence that ends
without ``. ? " '``: exactly ``evaluation.py``'s batcher with the ``unsup-bert`` flags of run.sh and
eval_only.sh. The loop embeds the text :meth:`PromptBERT.sentence_input` makes of each sentence
through :meth:`PromptBERT.sentence_head` (the [MASK] position, a fixed distance from the row's end).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from harness.encoder.calls import EncodeFn
from harness.errors import ConfigError
from methods.base import LossOutput, ModelLoader
from methods.losses import info_nce
from methods.params import ContrastiveParams
from methods.simcse import ContrastiveMethod

TEMPLATE = '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*'
"""run.sh ``unsup-bert``: ``TEMPLATE`` (the first view, and the evaluation's)."""
TEMPLATE2 = '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*'
"""run.sh ``unsup-bert``: ``TEMPLATE2`` (``--mask_embedding_sentence_different_template``)."""
END_PUNCTUATION = ".?\"'"
"""``evaluation.py``: a sentence not ending in one of these gets a full stop."""


def split_template(template: str, mask_token: str = "*mask*") -> tuple[str, str]:
    """The text before and after the sentence, as ``train.py`` reads a template: ``*mask*`` becomes
    the mask token, ``*sep+*`` and ``*cls*`` go (the tokenizer adds its own), ``_`` is a space.

    Raises:
        ConfigError: the template has a space, or not exactly one ``*sent_0*`` and one ``*mask*``.
    """
    if " " in template or template.count("*sent_0*") != 1 or template.count("*mask*") != 1:
        raise ConfigError(
            f"a PromptBERT template has no spaces ('_' is one), one *sent_0* and one *mask*, got {template!r}"
        )
    text = template.replace("*mask*", mask_token).replace("*sep+*", "").replace("*cls*", "")
    prefix, suffix = text.split("*sent_0*")
    if mask_token not in suffix:
        raise ConfigError(f"the template's *mask* must follow the sentence, got {template!r}")
    return prefix.replace("_", " "), suffix.replace("_", " ")


@dataclass(frozen=True)
class Template:
    """One template's token ids (no special tokens), its [MASK]'s index in the suffix and the
    tokenizer's first and last special tokens."""

    prefix: list[int]
    suffix: list[int]
    mask_at: int
    first: int
    last: int


@dataclass(frozen=True)
class PromptBERTParams(ContrastiveParams):
    """Hyper-parameters of unsupervised PromptBERT, besides the shared ``temperature`` (run.sh
    ``--temp 0.05``) and ``mlp`` (``--mlp_only_train``: Linear + Tanh in training only).

    Attributes:
        template: the first view's template, and the evaluation's (run.sh ``unsup-bert``
            ``TEMPLATE``, in the released notation, see the module docstring).
        template2: the second view's template (``TEMPLATE2``); the same as ``template`` gives two
            dropout views of one template.
        denoise: subtract each template's own [MASK] state at the sentence's length (template
            denoising, ``--mask_embedding_sentence_delta``); False: the raw [MASK] states.
    """

    template: str = TEMPLATE
    template2: str = TEMPLATE2
    denoise: bool = True

    def validate(self, hidden_size: int | None = None) -> None:
        super().validate(hidden_size)
        for name in ("template", "template2"):
            try:
                split_template(getattr(self, name))
            except ConfigError as err:
                raise ConfigError(f"{name}: {err}") from None

    def describe(self, hidden_size: int) -> dict[str, str]:
        return {
            "unused": "train_pooler and eval_pooler (the embedding is the template's [MASK] state)",
            "sentence_embedding": "the last layer's [MASK] state of `template` around the sentence, "
            "no denoising, no MLP (the released evaluation.py)",
        }


class MaskState(nn.Module):
    """The sentence head: the last layer's state at the [MASK], ``from_end`` tokens before the row's
    last real token (the template's suffix after the [MASK], and the closing special token)."""

    def __init__(self) -> None:
        super().__init__()
        self.from_end = -1

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.from_end < 0:
            raise RuntimeError("promptbert: the sentence head is not bound to a tokenizer yet")
        at = mask.sum(dim=1) - 1 - self.from_end
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), at]


class PromptBERT(ContrastiveMethod[PromptBERTParams]):
    """Two templates' [MASK] states, template-denoised, InfoNCE (see the module docstring)."""

    name = "promptbert"
    description = (
        "PromptBERT: the [MASK] state of a prompt template as the sentence embedding; two templates as "
        "the two views, each denoised by the template's own [MASK] state, InfoNCE."
    )
    citation = (
        "Jiang et al., PromptBERT: Improving BERT Sentence Embeddings with Prompts, EMNLP 2022 "
        "(github.com/kongds/Prompt-BERT)"
    )
    smoke_params = ({}, {"denoise": False, "template2": TEMPLATE})

    def __init__(self, params: PromptBERTParams, hidden_size: int) -> None:
        super().__init__(params, hidden_size)
        self.mask_state = MaskState()
        self.templates: list[Template] = []
        self.pad_id = 0
        self._text: Callable[[str], str] | None = None

    def bind(self, encoder: nn.Module, load: ModelLoader | None = None) -> None:
        super().bind(encoder, load)
        tokenizer: Any = getattr(encoder, "tokenizer", None)
        mask_token = getattr(tokenizer, "mask_token", None)
        mask_id = getattr(tokenizer, "mask_token_id", None)
        if tokenizer is None or mask_token is None or mask_id is None:
            raise ConfigError(
                "promptbert: the template's [MASK] needs an encoder whose tokenizer has a mask token"
            )
        self.pad_id = int(getattr(tokenizer, "pad_token_id", None) or 0)
        self.templates = [
            self._tokenize(tokenizer, t, str(mask_token), int(mask_id))
            for t in (self.params.template, self.params.template2)
        ]
        prefix, suffix = split_template(self.params.template, str(mask_token))

        def text(sentence: str) -> str:  # evaluation.py's batcher
            if sentence and sentence[-1] not in END_PUNCTUATION:
                sentence += "."
            return (prefix + sentence + suffix).strip()

        first = self.templates[0]
        self.mask_state.from_end = len(first.suffix) - first.mask_at
        ids = tokenizer(text("a sentence"))["input_ids"]
        if ids.count(mask_id) != 1 or ids[len(ids) - 1 - self.mask_state.from_end] != mask_id:
            raise ConfigError(
                f"promptbert: {self.params.template!r} does not tokenize around a sentence as a prefix, "
                "the sentence and a suffix holding the [MASK] with this encoder's tokenizer"
            )
        self._text = text

    @staticmethod
    def _tokenize(tokenizer: Any, template: str, mask_token: str, mask_id: int) -> Template:
        """``train.py``: the prefix's and suffix's ids, and the template alone as ``tokenizer.encode``
        gives it, which must be ``[first] + prefix + suffix + [last]`` (the code asserts the same)."""
        prefix, suffix = split_template(template, mask_token)
        pre = list(tokenizer.encode(prefix, add_special_tokens=False))
        suf = list(tokenizer.encode(suffix, add_special_tokens=False))
        alone = list(tokenizer.encode(prefix + suffix))
        if len(alone) != len(pre) + len(suf) + 2 or alone[1:-1] != pre + suf or suf.count(mask_id) != 1:
            raise ConfigError(
                f"promptbert: {template!r} does not tokenize as prefix + suffix with this tokenizer"
            )
        return Template(pre, suf, suf.index(mask_id), int(alone[0]), int(alone[-1]))

    # -- evaluation ---------------------------------------------------------------------------------
    def sentence_head(self) -> nn.Module:
        return self.mask_state

    def sentence_input(self) -> Callable[[str], str]:
        if self._text is None:
            raise RuntimeError("promptbert: sentence_input() before bind()")
        return self._text

    def export_head(self) -> nn.Linear | None:
        return None  # the MLP is for training only; the embedding is the [MASK] state

    # -- training -----------------------------------------------------------------------------------
    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        if not self.templates:
            raise RuntimeError("promptbert: compute_loss() before bind()")
        ids, mask = batch["input_ids"], batch["attention_mask"]
        lengths = [int(n) - 2 for n in mask.sum(dim=1).tolist()]  # without [CLS] and [SEP]
        contents = [row[1 : 1 + c] for row, c in zip(ids.tolist(), lengths, strict=True)]
        rows: list[tuple[list[int], list[int], int]] = []  # ids, positions, the [MASK]'s index
        for t in self.templates:
            for content in contents:
                row = [t.first, *t.prefix, *content, *t.suffix, t.last]
                rows.append((row, list(range(len(row))), 1 + len(t.prefix) + len(content) + t.mask_at))
        if self.params.denoise:  # each template alone, its suffix where the sentence's c tokens put it
            for t in self.templates:
                alone = [t.first, *t.prefix, *t.suffix, t.last]
                start = 1 + len(t.prefix)
                for c in lengths:
                    positions = [p if p < start else p + c for p in range(len(alone))]
                    rows.append((alone, positions, start + t.mask_at))
        states = self._mask_states(encode, rows, ids.device)
        b = len(contents)
        views = [states[:b], states[b : 2 * b]]
        if self.params.denoise:  # z = h - delta(|s|); one template row per sentence (see the docstring)
            views = [views[v] - states[(2 + v) * b : (3 + v) * b] for v in range(2)]
        loss = info_nce(self.head(views[0]), self.head(views[1]), self.params.temperature)
        return LossOutput(loss, {"loss_infonce": loss.detach()})

    def _mask_states(
        self, encode: EncodeFn, rows: list[tuple[list[int], list[int], int]], device: torch.device
    ) -> torch.Tensor:
        """One encoder call on the rows (padded to the longest), the last layer at each [MASK]."""
        width = max(len(r) for r, _, _ in rows)
        n = len(rows)
        ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        attention = torch.zeros(n, width, dtype=torch.long)
        positions = torch.zeros(n, width, dtype=torch.long)
        for i, (row, pos, _) in enumerate(rows):
            ids[i, : len(row)] = torch.tensor(row)
            attention[i, : len(row)] = 1
            positions[i, : len(row)] = torch.tensor(pos)
        batch = {
            "input_ids": ids.to(device),
            "attention_mask": attention.to(device),
            "token_type_ids": torch.zeros_like(ids).to(device),
            "position_ids": positions.to(device),
        }
        hidden = encode.tokens(batch).hidden
        at = torch.tensor([m for _, _, m in rows], device=device)
        return hidden[torch.arange(n, device=device), at]
