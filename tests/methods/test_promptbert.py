"""PromptBERT (unsupervised, template denoising) against a loop written from the released code
(kongds/Prompt-BERT): the templates as ``train.py`` reads them, ``prepare_features``' rows,
``cl_forward``'s [MASK] states, ``get_delta``'s template-only rows with shifted positions, the MLP and
InfoNCE; loss and every gradient in float64 without dropout. Then the evaluation text and embedding
against ``evaluation.py``'s batcher, the reduction to SimCSE, the released settings and validation.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from harness.encoder.loading import load_encoder
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from methods import build_params
from methods.losses import info_nce
from methods.promptbert import TEMPLATE, TEMPLATE2, PromptBERT, PromptBERTParams, split_template
from methods.simcse import SimCSE, SimCSEParams
from tests.helpers import no_dropout

SENTENCES = [
    "a man is playing a guitar .",
    "two dogs run",
    "the woman slices an onion in the kitchen",
    "hi",
    "children are playing soccer in a park ?",
]

MAX_LEN = 32


def released_parse(template: str, tokenizer: Any) -> tuple[str, str]:
    """train.py: the template to ``mask_embedding_sentence_bs`` / ``_es``."""
    t = template.replace("*mask*", tokenizer.mask_token).replace("*sep+*", "").replace("*cls*", "")
    parts = t.replace("*sent_0*", " ").split(" ")
    return parts[0].replace("_", " "), parts[1].replace("_", " ")


def released_loss(model: Any, tokenizer: Any, mlp: nn.Module, params: PromptBERTParams) -> torch.Tensor:
    """``prepare_features`` + the collator + ``cl_forward`` (with ``get_delta``), as loops."""
    mask_id = tokenizer.mask_token_id
    bs, es = released_parse(params.template, tokenizer)
    bs2, es2 = released_parse(params.template2, tokenizer)
    bs_ids, es_ids = tokenizer.encode(bs)[:-1], tokenizer.encode(es)[1:]  # drop [SEP] / [CLS]
    bs2_ids, es2_ids = tokenizer.encode(bs2)[:-1], tokenizer.encode(es2)[1:]
    rows = []
    for s in SENTENCES:  # features[key] = [[view 1, view 2] for each sentence]: sentence-major rows
        tokens = tokenizer.encode(s, add_special_tokens=False)[:MAX_LEN]
        rows += [bs_ids + tokens + es_ids, bs2_ids + tokens + es2_ids]
    width = max(len(r) for r in rows)
    input_ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    last = model(input_ids=input_ids, attention_mask=attention, return_dict=True).last_hidden_state
    pooled = last[input_ids == mask_id].view(len(SENTENCES), 2, -1)
    if params.denoise:
        model_bs = tokenizer.encode(bs, add_special_tokens=False)  # cls.bs: template 1's

        def get_delta(template_ids: list[int], length: int = 50) -> tuple[torch.Tensor, int]:
            d_ids = torch.tensor([template_ids]).repeat(length, 1)
            d_pos = torch.arange(d_ids.shape[1]).unsqueeze(0).repeat(length, 1)
            d_pos[:, len(model_bs) + 1 :] += torch.arange(length).unsqueeze(-1)
            hidden = model(input_ids=d_ids, position_ids=d_pos, return_dict=True).last_hidden_state
            return hidden[d_ids == mask_id], d_ids.shape[1]

        delta, template_len = get_delta(tokenizer.encode(bs + es))
        delta1, template_len1 = get_delta(tokenizer.encode(bs2 + es2))
        mask = attention.view(len(SENTENCES), 2, -1)
        blen = mask.sum(-1) - template_len
        first = pooled[:, 0] - delta[blen[:, 0]]
        blen = mask.sum(-1) - template_len1
        second = pooled[:, 1] - delta1[blen[:, 1]]
        pooled = torch.stack([first, second], dim=1)
    z = mlp(pooled)
    cos_sim = F.cosine_similarity(z[:, 0].unsqueeze(1), z[:, 1].unsqueeze(0), dim=-1) / params.temperature
    return F.cross_entropy(cos_sim, torch.arange(len(SENTENCES)))


CASES = [
    {},
    {"denoise": False},
    {"template2": TEMPLATE},
    {"template": "*cls*_The_sentence_:_'_*sent_0*_'_means*mask*.*sep+*", "template2": TEMPLATE},
]


@pytest.mark.parametrize("overrides", CASES)
def test_loss_and_gradients_match_the_released_loop(float64, overrides) -> None:
    encoder = load_encoder("random:tiny", seed=21)
    no_dropout(encoder)
    encoder.train()
    params = PromptBERTParams.from_overrides(overrides)
    method = PromptBERT(params, encoder.hidden_size)
    method.bind(encoder)
    batch = encoder.tokenize(SENTENCES, max_length=MAX_LEN)
    assert method.mlp is not None
    weights = [p for p in [*encoder.parameters(), *method.mlp.parameters()] if p.requires_grad]
    ours = method.compute_loss(TrainingEncode(encoder, length_buckets=3), batch, step=1).loss
    theirs = released_loss(encoder.model, encoder.tokenizer, method.mlp, params)
    assert float(ours.detach()) == pytest.approx(float(theirs.detach()), rel=1e-11)
    g_ours = torch.autograd.grad(ours, weights, allow_unused=True)
    g_theirs = torch.autograd.grad(theirs, weights, allow_unused=True)
    for a, b in zip(g_ours, g_theirs, strict=True):
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_the_templates_read_as_the_released_code_reads_them() -> None:
    encoder = load_encoder("random:tiny", seed=0)
    tok = encoder.tokenizer
    for template in (TEMPLATE, TEMPLATE2, "*cls*_This_sentence_:_'_*sent_0*_'_means*mask*.*sep+*"):
        assert split_template(template, tok.mask_token) == released_parse(template, tok)
    method = PromptBERT(PromptBERTParams(), encoder.hidden_size)
    method.bind(encoder)
    first = method.templates[0]
    # evaluation.py's own comment: the unsup-bert template alone on bert-base-uncased's vocabulary
    alone = [first.first, *first.prefix, *first.suffix, first.last]
    assert alone == [101, 2023, 6251, 1997, 1000, 1000, 2965, 103, 1012, 102]


def released_batcher_text(sentence: str, template: str, mask_token: str) -> str:
    """evaluation.py's batcher with ``--mask_embedding_sentence --mask_embedding_sentence_template``."""
    template = (
        template.replace("*mask*", mask_token).replace("_", " ").replace("*sep+*", "").replace("*cls*", "")
    )
    if len(sentence) > 0 and sentence[-1] not in ".?\"'":
        sentence += "."
    return template.replace("*sent 0*", sentence).strip()


def test_the_evaluation_text_and_embedding_are_the_released_batchers() -> None:
    encoder = load_encoder("random:tiny", seed=22)
    method = PromptBERT(PromptBERTParams(), encoder.hidden_size)
    method.bind(encoder)
    text = method.sentence_input()
    sentences = [*SENTENCES, 'he said "no"', "it's fine'"]
    texts = [text(s) for s in sentences]
    assert texts == [released_batcher_text(s, TEMPLATE, encoder.tokenizer.mask_token) for s in sentences]
    assert texts[1] == 'This sentence of "two dogs run." means[MASK].'
    got = encoder.embed(texts, head=method.sentence_head())
    batch = encoder.tokenizer(texts, padding=True, return_tensors="pt")
    model: Any = encoder.model
    model.eval()
    with torch.no_grad():
        last = model(**batch, output_hidden_states=True, return_dict=True).last_hidden_state
    expected = last[batch["input_ids"] == encoder.tokenizer.mask_token_id]
    torch.testing.assert_close(torch.from_numpy(got), expected, rtol=1e-5, atol=1e-5)


def test_one_template_without_denoising_is_simcse_on_the_mask_states(float64) -> None:
    """The reduction to the method it extends: both views in one template, no denoising, no dropout:
    SimCSE's loss (its own compute_loss, the same MLP) on the two views' [MASK] states."""
    encoder = load_encoder("random:tiny", seed=23)
    no_dropout(encoder)
    method = PromptBERT(PromptBERTParams(template2=TEMPLATE, denoise=False), encoder.hidden_size)
    method.bind(encoder)
    batch = encoder.tokenize(SENTENCES, max_length=MAX_LEN)
    ours = method.compute_loss(TrainingEncode(encoder), batch, step=1).loss
    prefix, suffix = split_template(TEMPLATE, encoder.tokenizer.mask_token)
    texts = [prefix + s + suffix for s in SENTENCES]  # the training rows: no full stop added
    model: Any = encoder.model
    templated = encoder.tokenizer(texts, padding=True, return_tensors="pt")
    last = model(**templated, return_dict=True).last_hidden_state
    states = last[templated["input_ids"] == encoder.tokenizer.mask_token_id]

    simcse = SimCSE(SimCSEParams(), encoder.hidden_size)
    assert simcse.mlp is not None and method.mlp is not None
    simcse.mlp.load_state_dict(method.mlp.state_dict())

    def encode(rows: dict[str, torch.Tensor], **_: Any) -> torch.Tensor:  # two views per sentence
        return states.repeat_interleave(2, dim=0)

    theirs = simcse.compute_loss(encode, batch, step=1).loss  # type: ignore[arg-type]
    assert float(ours.detach()) == pytest.approx(float(theirs.detach()), rel=1e-11)
    z = method.mlp(states)
    assert float(ours.detach()) == pytest.approx(float(info_nce(z, z, 0.05).detach()), rel=1e-11)


def test_the_released_settings_are_the_defaults() -> None:
    p = PromptBERTParams()
    assert (p.template, p.template2, p.denoise, p.temperature, p.mlp) == (
        TEMPLATE,
        TEMPLATE2,
        True,
        0.05,
        True,
    )
    assert TEMPLATE == '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*'  # run.sh unsup-bert
    assert TEMPLATE2 == '*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*'


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("template", "This sentence *sent_0* means *mask*"),
        ("template", "*cls*_*sent_0*_*sent_0*_*mask*"),
        ("template2", "*cls*_This_sentence_*sent_0*"),
        ("template2", "*cls*_*mask*_*sent_0*_means"),
    ],
)
def test_bad_templates_are_config_errors_naming_the_field(key, value) -> None:
    with pytest.raises(ConfigError, match=key):
        build_params("promptbert", {key: value}).validate()


def test_an_encoder_without_a_mask_token_is_refused() -> None:
    encoder = load_encoder("random:tiny", seed=24)
    encoder.tokenizer = _NoMask(encoder.tokenizer)
    with pytest.raises(ConfigError, match="mask token"):
        PromptBERT(PromptBERTParams(), encoder.hidden_size).bind(encoder)


class _NoMask:
    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.mask_token = None
        self.mask_token_id = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)
