"""The encoder wrapper: poolers, dropout switching, embedding contract, loading errors."""

from __future__ import annotations

from typing import Any
from unittest import mock

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from harness.config.choices import POOLERS
from harness.config.models import hidden_size_of
from harness.encoder.loading import load_encoder
from harness.encoder.model import check_pooler, dropout_off, dropout_rates
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError, ModelLoadError


@pytest.fixture(scope="module")
def tiny():
    return load_encoder("random:tiny", seed=0)


SENTS = ["a man is playing a guitar .", "", "two dogs run on the beach and bark loudly at the waves ."]


def test_random_tiny_is_seeded():
    a = load_encoder("random:tiny", seed=3)
    b = load_encoder("random:tiny", seed=3)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


@pytest.mark.parametrize("pooler", POOLERS)
def test_embed_shapes_and_dtype(tiny, pooler):
    out = tiny.embed(SENTS, pooler)
    assert out.shape == (3, tiny.hidden_size)
    assert out.dtype == np.float32
    assert np.isfinite(out).all()


def test_embed_ignores_padding(tiny):
    """A sentence's embedding does not depend on what else is in its batch (padding is masked)."""
    alone = tiny.embed(SENTS[:1])
    batched = tiny.embed(SENTS)
    np.testing.assert_allclose(alone[0], batched[0], atol=1e-5)


def test_embed_restores_training_mode(tiny):
    tiny.train()
    tiny.embed(SENTS)
    assert tiny.training
    tiny.eval()
    tiny.embed(SENTS)
    assert not tiny.training


def test_avg_pooler_matches_manual_mean(tiny):
    batch = tiny.tokenize(SENTS)
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
    batch = tiny.tokenize(SENTS, max_length=32)
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


def test_bad_pooler_and_models():
    with pytest.raises(ConfigError, match="unknown pooler 'mean'"):
        check_pooler("mean")
    with pytest.raises(ModelLoadError, match="does not exist"):
        load_encoder("./no/such/model")
    with pytest.raises(ConfigError, match="random:huge"):
        load_encoder("random:huge")
    assert hidden_size_of("random:tiny") == 64


def test_packaged_hidden_size_without_weights():
    assert hidden_size_of(None) == 384


def test_length_buckets_give_the_same_features_and_gradients() -> None:
    from harness.encoder.training_encode import TrainingEncode

    torch.set_num_threads(1)
    encoder = load_encoder("random:tiny", seed=0)
    encoder.eval()  # no dropout: both paths must compute the same function of the same rows
    sentences = ["a b", "a much longer sentence with many more tokens in it .", "c", "mid length one here"]
    batch = encoder.tokenize(sentences * 3, max_length=32)
    plain = TrainingEncode(encoder)(batch)
    plain_grad = torch.autograd.grad(plain.square().sum(), list(encoder.parameters()), allow_unused=True)
    for buckets in (2, 3, 12, 50):
        bucketed = TrainingEncode(encoder, length_buckets=buckets)(batch)
        torch.testing.assert_close(bucketed, plain, rtol=1e-5, atol=1e-5)
        grads = torch.autograd.grad(bucketed.square().sum(), list(encoder.parameters()), allow_unused=True)
        for a, b in zip(grads, plain_grad, strict=True):
            if a is None or b is None:
                assert a is None and b is None
            else:
                torch.testing.assert_close(a, b, rtol=1e-4, atol=5e-5)


def test_length_buckets_share_one_word_embedding_lookup() -> None:
    """The buckets' forwards get their rows' word embeddings from one lookup (inputs_embeds), so the
    table's dense gradient is built once per call; features and gradients equal the lookup per bucket."""
    torch.set_num_threads(1)
    encoder = load_encoder("random:tiny", seed=0)
    encoder.eval()
    table = encoder.word_embeddings()
    assert table is not None
    lookups: list[tuple[int, ...]] = []
    hook = table.register_forward_hook(lambda m, i, o: lookups.append(tuple(o.shape)))
    sentences = ["a b", "a much longer sentence with many more tokens in it .", "c", "mid length one here"]
    batch = encoder.tokenize(sentences * 3, max_length=32)
    params = list(encoder.parameters())
    results = {}
    for shared in (True, False):
        encoder.one_word_lookup = shared
        lookups.clear()
        out = TrainingEncode(encoder, length_buckets=3)(batch)
        grads = torch.autograd.grad(out.square().sum(), params, allow_unused=True)
        results[shared] = (out, grads, list(lookups))
    hook.remove()
    assert results[True][2] == [(12, batch["input_ids"].shape[1], 64)]  # one lookup, every row
    assert len(results[False][2]) == 3  # one per bucket
    torch.testing.assert_close(results[True][0], results[False][0], rtol=0, atol=0)
    for a, b in zip(results[True][1], results[False][1], strict=True):
        if a is None or b is None:
            assert a is None and b is None
        else:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_word_embedding_lookup_is_shared_only_for_bert() -> None:
    encoder = load_encoder("random:tiny", seed=0)
    assert encoder.word_embeddings() is encoder.model.embeddings.word_embeddings  # type: ignore[union-attr]
    setattr(getattr(encoder.model, "config"), "model_type", "roberta")  # noqa: B009, B010
    assert encoder.word_embeddings() is None


def test_length_buckets_trim_padding() -> None:
    from harness.encoder.training_encode import TrainingEncode

    encoder = load_encoder("random:tiny", seed=0)
    widths: list[int] = []
    original = encoder.features

    def spy(
        batch: dict[str, torch.Tensor], pooler: str = "cls_before_pooler", *, compiled: bool = False
    ) -> torch.Tensor:
        widths.append(int(batch["attention_mask"].shape[1]))
        return original(batch, pooler)

    encoder.features = spy  # type: ignore[method-assign]
    batch = encoder.tokenize(["a", "b", "a much longer sentence with many more tokens ."], max_length=32)
    TrainingEncode(encoder, length_buckets=2)(batch)
    assert widths == [3, batch["input_ids"].shape[1]]  # [CLS] a [SEP] alone, then the long pair


def test_bf16_embedding_is_float32_and_close_to_fp32(tiny):
    fp32 = tiny.embed(SENTS, "cls_before_pooler")
    bf16 = tiny.embed(SENTS, "cls_before_pooler", "bf16")
    assert bf16.dtype == np.float32 and bf16.shape == fp32.shape
    assert not np.array_equal(bf16, fp32)  # autocast really ran in bf16
    cos = (fp32 * bf16).sum(1) / np.linalg.norm(fp32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert cos.min() > 0.99


@pytest.mark.parametrize("pooler", ["cls_before_pooler", "cls"])
def test_cls_poolers_compute_the_last_layer_at_cls_only_with_the_same_result(pooler):
    encoder = load_encoder("random:tiny", seed=1)
    batch = encoder.tokenize(SENTS * 3)  # padded rows of very different lengths
    last: Any = getattr(encoder.model, "encoder").layer[-1]  # noqa: B009
    calls: list[tuple[int, ...]] = []
    hook = last.register_forward_hook(lambda m, i, o: calls.append(tuple(o.shape)))
    try:
        encoder.eval()
        encoder.cls_shortcut = False
        full = encoder.features(batch, pooler)
        encoder.cls_shortcut = True
        fast = encoder.features(batch, pooler)
    finally:
        hook.remove()
    # the full layer returns every position; the shortcut only [CLS] (hooks see the class forward only)
    assert calls and calls[0][1] == batch["input_ids"].shape[1]
    assert torch.allclose(full, fast, atol=1e-5)
    assert "forward" not in vars(last)  # the class's forward is back


def test_cls_shortcut_gives_the_same_gradients_with_dropout_off():
    encoder = load_encoder("random:tiny", seed=2)
    batch = encoder.tokenize(SENTS * 2)
    grads = []
    for shortcut in (False, True):
        encoder.zero_grad()
        encoder.cls_shortcut = shortcut
        encoder.train()
        with dropout_off(encoder):
            encoder.features(batch, "cls_before_pooler").pow(2).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in encoder.parameters() if p.grad is not None]))
    assert torch.allclose(grads[0], grads[1], atol=1e-5, rtol=1e-4)
    # with dropout on, the shortcut draws its own masks: different values, same shape, finite
    encoder.train()
    a = encoder.features(batch, "cls_before_pooler")
    b = encoder.features(batch, "cls_before_pooler")
    assert a.shape == b.shape and not torch.equal(a, b) and torch.isfinite(a).all()


def test_cls_shortcut_leaves_models_without_a_bert_layer_alone():
    from harness.encoder.forward import cls_only_last_layer

    plain = torch.nn.Linear(3, 3)
    with cls_only_last_layer(plain, torch.ones(2, 4)):
        assert "forward" not in vars(plain)


@pytest.mark.parametrize("pooler", ["cls_before_pooler", "avg"])
def test_onednn_linears_give_the_fp32_embeddings_up_to_rounding(pooler):
    from harness.encoder.cpu_kernels import onednn_available

    if not onednn_available():
        pytest.skip("this PyTorch has no oneDNN linear operator (the default path is used)")
    encoder = load_encoder("random:tiny", seed=3)
    calls: list[str] = []
    real = torch.ops.mkldnn._linear_pointwise

    def counting(*args: Any) -> torch.Tensor:
        calls.append(args[3])  # the fused post-op: "none" or "gelu"
        return real(*args)

    encoder.onednn_fp32 = False
    plain = encoder.embed(SENTS * 3, pooler)
    encoder.onednn_fp32 = True
    with mock.patch.object(torch.ops.mkldnn, "_linear_pointwise", counting):
        fast = encoder.embed(SENTS * 3, pooler)
        assert calls and "gelu" in calls  # oneDNN ran, GELU fused into the feed-forward's first layer
        calls.clear()
        encoder.embed(SENTS, pooler, "bf16")
        assert not calls  # autocast keeps its own (bf16) path
    np.testing.assert_allclose(fast, plain, rtol=1e-4, atol=1e-5)
    assert not any("forward" in vars(m) for m in encoder.model.modules())  # class forwards are back


def test_onednn_linears_give_the_fp32_gradients_up_to_rounding():
    from harness.encoder.cpu_kernels import onednn_available

    if not onednn_available():
        pytest.skip("this PyTorch has no oneDNN linear operator (the default path is used)")
    encoder = load_encoder("random:tiny", seed=4)
    batch = encoder.tokenize(SENTS * 2)
    calls: list[str] = []
    real = torch.ops.mkldnn._linear_pointwise

    def counting(*args: Any) -> torch.Tensor:
        calls.append(args[3])
        return real(*args)

    grads, losses = [], []
    for fast in (False, True):
        encoder.zero_grad()
        encoder.onednn_fp32 = fast
        encoder.train()
        with mock.patch.object(torch.ops.mkldnn, "_linear_pointwise", counting), dropout_off(encoder):
            loss = encoder.features(batch, "avg").pow(2).sum()
            forward_calls = len(calls)
            loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.flatten() for p in encoder.parameters() if p.grad is not None]))
        if fast:  # forward products, then dx and dW per layer; GELU unfused where its gradient is needed
            assert forward_calls > 0 and len(calls) > 2 * forward_calls and set(calls) == {"none"}
        else:
            assert not calls
        calls.clear()
    assert losses[0] == pytest.approx(losses[1], rel=1e-5)
    assert torch.allclose(grads[0], grads[1], atol=1e-6, rtol=1e-4)
    assert grads[1].abs().sum() > 0


def test_exact_gelu_is_recognised_and_approximations_are_not():
    from transformers.activations import ACT2FN

    from harness.encoder.cpu_kernels import _exact_gelu

    assert _exact_gelu(ACT2FN["gelu"]) and _exact_gelu(torch.nn.GELU()) and _exact_gelu(F.gelu)
    assert not _exact_gelu(ACT2FN["gelu_new"]) and not _exact_gelu(torch.nn.GELU(approximate="tanh"))
    assert not _exact_gelu(ACT2FN["relu"]) and not _exact_gelu(None)


def test_a_onednn_operator_that_fails_on_this_cpu_leaves_the_default_path():
    from harness.encoder.cpu_kernels import onednn_available

    def broken(*args: Any) -> torch.Tensor:
        raise RuntimeError("could not create a primitive")

    encoder = load_encoder("random:tiny", seed=5)
    expected = encoder.embed(SENTS)
    onednn_available.cache_clear()
    try:
        with mock.patch.object(torch.ops.mkldnn, "_linear_pointwise", broken):
            assert not onednn_available()
            np.testing.assert_allclose(encoder.embed(SENTS), expected, rtol=1e-4, atol=1e-5)
    finally:
        onednn_available.cache_clear()


# -- edits inside the embedding layer (encode(embeddings=EmbeddingEdit(...))) ------------------------


def _identity(x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return x


@pytest.mark.parametrize("pooler", POOLERS)
@pytest.mark.parametrize("buckets", [1, 3])
def test_identity_embedding_edit_is_the_plain_call_bit_for_bit(pooler, buckets):
    """The forward in parts (embedding module, edit, layers, pooler) computes exactly the model's own
    call: the same values and gradients bit for bit, with dropout on (same random draws) and off."""
    from methods.base import EmbeddingEdit

    encoder = load_encoder("random:tiny", seed=0)
    encoder.train()
    batch = encoder.tokenize(["a b c d e f", "g h", "i j k l m n o p q", "r s t", "u"], max_length=16)
    encode = TrainingEncode(encoder, pooler, buckets)
    edit = EmbeddingEdit(words=_identity, output=_identity)
    for dropout in (True, False):
        results = []
        for embeddings in (None, edit, EmbeddingEdit()):
            torch.manual_seed(0)
            out = encode(batch, dropout=dropout, embeddings=embeddings)
            grads = torch.autograd.grad(out.square().sum(), list(encoder.parameters()), allow_unused=True)
            results.append((out, grads))
        (plain, plain_grads), *edited = results
        for out, grads in edited:
            assert torch.equal(out, plain)
            for a, b in zip(grads, plain_grads, strict=True):
                assert (a is None and b is None) or torch.equal(a, b)


def test_embedding_edits_act_where_they_say_with_their_rows():
    """``output`` edits what the first layer reads, ``words`` the lookup before LayerNorm; each bucket's
    edit sees its own rows (indices into the call) trimmed to its width; position_ids in the batch
    reach the position embeddings."""
    from methods.base import EmbeddingEdit

    encoder = load_encoder("random:tiny", seed=0)
    encoder.eval()
    batch = encoder.tokenize(["a b c d e f", "g h", "i j k l m n o p q", "r"], max_length=16)
    seen: list[tuple[list[int], int]] = []

    def zero_row_two(x: torch.Tensor, mask: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        seen.append((rows.tolist(), int(x.shape[1])))
        keep = (rows != 2).to(x.dtype)[:, None, None]
        return x * keep

    plain = TrainingEncode(encoder, "avg", 1)(batch)
    for buckets in (1, 2):
        seen.clear()
        out = TrainingEncode(encoder, "avg", buckets)(batch, embeddings=EmbeddingEdit(output=zero_row_two))
        assert sorted(r for rows, _ in seen for r in rows) == [0, 1, 2, 3]
        lengths = batch["attention_mask"].sum(1)
        assert all(width == int(lengths[rows].max()) for rows, width in seen)
        changed = [not torch.allclose(out[i], plain[i], atol=1e-6) for i in range(4)]
        assert changed == [False, False, True, False]
    # a constant added to every channel of the word lookup is removed by the embedding LayerNorm
    # (the words edit acts before it); added to the embedding output, it changes every row
    shift = EmbeddingEdit(words=lambda x, m, r: x + 0.5)
    torch.testing.assert_close(TrainingEncode(encoder, "avg")(batch, embeddings=shift), plain)
    shifted = TrainingEncode(encoder, "avg")(batch, embeddings=EmbeddingEdit(output=lambda x, m, r: x + 0.5))
    assert not torch.allclose(shifted, plain, atol=1e-3)
    scaled = EmbeddingEdit(words=lambda x, m, r: x * torch.linspace(0.0, 2.0, x.shape[-1]))
    assert not torch.allclose(TrainingEncode(encoder, "avg")(batch, embeddings=scaled), plain, atol=1e-3)
    # position ids carried by the batch: the identity permutation is the plain call, another is not
    n, length = batch["input_ids"].shape
    same = TrainingEncode(encoder, "avg")({**batch, "position_ids": torch.arange(length).expand(n, -1)})
    assert torch.equal(same, plain)
    flipped = torch.arange(length).flip(0).expand(n, -1)
    assert not torch.allclose(TrainingEncode(encoder, "avg")({**batch, "position_ids": flipped}), plain)


def test_embedding_edits_need_a_bert_encoder(tiny):
    from methods.base import EmbeddingEdit

    batch = tiny.tokenize(["a b"], max_length=8)
    with (
        mock.patch("harness.encoder.forward.bert_word_embeddings", return_value=None),
        pytest.raises(ConfigError, match="need a BERT encoder"),
    ):
        TrainingEncode(tiny)(batch, embeddings=EmbeddingEdit(output=_identity))
