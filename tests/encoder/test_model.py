"""The encoder wrapper: poolers, the embedding contract, dropout switching, truncation, bf16, heads."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.config.choices import POOLERS
from harness.encoder.loading import load_encoder
from harness.encoder.model import dropout_off, dropout_rates
from harness.encoder.training_encode import TrainingEncode
from harness.errors import DataError
from tests.helpers import EMBED_SENTS, TOKEN_SENTS, reference_states


@pytest.mark.parametrize("pooler", POOLERS)
def test_embed_shapes_and_dtype(tiny, pooler):
    out = tiny.embed(EMBED_SENTS, pooler)
    assert out.shape == (3, tiny.hidden_size)
    assert out.dtype == np.float32
    assert np.isfinite(out).all()


def test_embed_ignores_padding(tiny):
    """A sentence's embedding does not depend on what else is in its batch (padding is masked)."""
    alone = tiny.embed(EMBED_SENTS[:1])
    batched = tiny.embed(EMBED_SENTS)
    np.testing.assert_allclose(alone[0], batched[0], atol=1e-5)


def test_embed_restores_training_mode(tiny):
    tiny.train()
    tiny.embed(EMBED_SENTS)
    assert tiny.training
    tiny.eval()
    tiny.embed(EMBED_SENTS)
    assert not tiny.training


def test_avg_pooler_matches_manual_mean(tiny):
    batch = tiny.tokenize(EMBED_SENTS)
    tiny.eval()
    with torch.no_grad():
        out = tiny.model(**batch, output_hidden_states=True)
        mask = batch["attention_mask"].unsqueeze(-1).float()
        manual = (out.hidden_states[1] + out.hidden_states[-1]) / 2
        manual = (manual * mask).sum(1) / mask.sum(1)
        np.testing.assert_allclose(tiny.features(batch, "avg_first_last").numpy(), manual.numpy(), atol=1e-6)
        np.testing.assert_allclose(  # the [CLS]-only last layer: equal up to float rounding
            tiny.features(batch, "cls_before_pooler").numpy(), out.last_hidden_state[:, 0].numpy(), atol=1e-5
        )


def test_dropout_off_is_deterministic_in_train_mode_and_restored(tiny):
    tiny.train()
    before = dropout_rates(tiny)
    assert any(p > 0 for p in before)
    encode = TrainingEncode(tiny)
    batch = tiny.tokenize(EMBED_SENTS, max_length=32)
    with torch.no_grad():
        a = encode(batch, dropout=False)
        b = encode(batch, dropout=False)
        c = encode(batch)
    torch.testing.assert_close(a, b)  # no dropout at all, attention dropout included
    assert not torch.allclose(a, c)  # dropout back on
    assert dropout_rates(tiny) == before
    assert tiny.training


def test_dropout_off_restores_on_error(tiny):
    before = dropout_rates(tiny)
    with pytest.raises(RuntimeError), dropout_off(tiny):
        assert all(p == 0 for p in dropout_rates(tiny))
        raise RuntimeError("boom")
    assert dropout_rates(tiny) == before


def test_training_truncates_evaluation_does_not(tiny):
    long = " ".join(["word"] * 100)
    assert tiny.tokenize([long], max_length=32)["input_ids"].shape[1] == 32
    assert tiny.tokenize([long])["input_ids"].shape[1] > 100


def test_a_sentence_longer_than_the_positions_is_one_error_line(tiny):
    with pytest.raises(
        DataError, match="a sentence of 602 tokens is longer than the 512 positions of encoder"
    ):
        tiny.embed([" ".join(["word"] * 600), "short"])
    assert tiny.embed([" ".join(["word"] * 510)]).shape == (1, tiny.hidden_size)  # 512 tokens fit


def test_word_embedding_lookup_is_shared_only_for_bert() -> None:
    encoder = load_encoder("random:tiny", seed=0)
    assert encoder.word_embeddings() is encoder.model.embeddings.word_embeddings  # type: ignore[union-attr]
    setattr(getattr(encoder.model, "config"), "model_type", "roberta")  # noqa: B009, B010
    assert encoder.word_embeddings() is None


def test_bf16_embedding_is_float32_and_close_to_fp32(tiny):
    fp32 = tiny.embed(EMBED_SENTS, "cls_before_pooler")
    bf16 = tiny.embed(EMBED_SENTS, "cls_before_pooler", "bf16")
    assert bf16.dtype == np.float32 and bf16.shape == fp32.shape
    assert not np.array_equal(bf16, fp32)  # autocast really ran in bf16
    cos = (fp32 * bf16).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cos.min() > 0.99


def test_embed_with_a_head_reads_token_states_and_without_is_unchanged(tiny):
    calls = []

    class Head(torch.nn.Module):
        def forward(self, hidden, mask):
            calls.append((hidden.clone(), mask.clone(), self.training))
            return hidden.sum(1)

    head = Head()
    tiny.train()
    got = tiny.embed(TOKEN_SENTS[:2], "avg", head=head)
    ((hidden, mask, training),) = calls
    assert not training and head.training and tiny.training  # eval inside, modes restored after
    batch = tiny.tokenize(TOKEN_SENTS[:2])
    torch.testing.assert_close(hidden, reference_states(tiny, batch), rtol=1e-5, atol=1e-5)
    assert torch.equal(mask, batch["attention_mask"])
    assert got.shape == (2, tiny.hidden_size)
    tiny.eval()
    with torch.inference_mode():
        plain = tiny.features(batch, "avg").numpy()
    tiny.train()
    assert (tiny.embed(TOKEN_SENTS[:2], "avg") == plain).all()


def test_token_cache_embeds_bit_for_bit_and_tokenises_each_batch_once(tiny, monkeypatch):
    """A run's dev evaluation batches through the cache: the very embeddings of tokenising every call, and
    each distinct batch tokenised once however often it is embedded."""
    from harness.encoder.model import TokenCache

    cache = TokenCache(tiny)
    calls = []
    tokenize = tiny.tokenize

    def counting(sentences, *args, **kwargs):
        calls.append(1)
        return tokenize(sentences, *args, **kwargs)

    monkeypatch.setattr(tiny, "tokenize", counting)
    for pooler in ("cls_before_pooler", "avg"):
        for _ in range(2):
            for batch in (EMBED_SENTS, EMBED_SENTS[:2]):
                want = tiny.embed(batch, pooler)
                got = tiny.embed_tensor(batch, pooler, tokens=cache)
                assert got.dtype == torch.float32 and got.device == tiny.device
                np.testing.assert_array_equal(got.numpy(), want)
    assert len(cache) == 2
    assert len(calls) == 2 + 8  # two cached batches, and the eight uncached embed() calls
