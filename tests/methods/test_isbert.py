"""IS-BERT: the Jensen-Shannon MI loss against a loop from the equations, the CNN against a loop
from the convolution's definition (padding never reaches the mean), the method's sentence head in
the training loop (dev evaluations, final tasks, best-step restore, no shared step-0 dev evaluation),
and the refusal of ``harness export`` / ``harness eval`` for its saved encoder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harness.run.training as train_mod
from harness.cli import main
from harness.encoder.saved import SENTENCE_HEAD_FILE
from harness.encoder.training_encode import TrainingEncode
from harness.errors import ConfigError
from harness.run.dev_cache import CACHE_DIR
from harness.run.footprint import footprint
from harness.run.training import train_run
from harness.store.run_config import resolve_config
from harness.store.run_store import RunStore
from methods import build_params
from methods.isbert import ISBERT, ISBERTParams, TokenCNN, jsd_local_global_loss
from tests.helpers import DEV_SENTENCES, SENTS, dev_scores

LOG2 = math.log(2.0)


def softplus(x: float) -> float:
    return math.log1p(math.exp(x)) if x < 30 else x + math.log1p(math.exp(-x))


def ref_jsd_loss(local: list[list[list[float]]], sentence: list[list[float]], lengths: list[int]) -> float:
    """E_neg - E_pos from the equations: every real token against its own sentence (positive) and
    every other sentence of the batch (negatives)."""
    b = len(sentence)
    pos, neg, count = 0.0, 0.0, 0
    for i in range(b):
        for t in range(lengths[i]):
            count += 1
            for j in range(b):
                s = sum(x * y for x, y in zip(local[i][t], sentence[j]))
                if j == i:
                    pos += LOG2 - math.log(1.0 + math.exp(-s))
                else:
                    neg += math.log(1.0 + math.exp(-s)) + s - LOG2
    e_pos = pos / count
    e_neg = neg / (count * (b - 1)) if b > 1 else 0.0
    return e_neg - e_pos


def random_mask(b: int, length: int, gen: torch.Generator) -> torch.Tensor:
    lengths = torch.randint(1, length + 1, (b,), generator=gen)
    lengths[0] = length  # the batch is padded to its longest row
    return (torch.arange(length)[None, :] < lengths[:, None]).long()


GRID = [(b, length, e) for b in (1, 2, 5) for length in (1, 4, 9) for e in (3, 8)]


@pytest.mark.parametrize(("b", "length", "e"), GRID)
def test_jsd_loss_matches_loop(b, length, e):
    gen = torch.Generator().manual_seed(100 * b + 10 * length + e)
    mask = random_mask(b, length, gen)
    local = torch.randn(b, length, e, generator=gen).double()
    sentence = torch.randn(b, e, generator=gen).double()
    got = jsd_local_global_loss(local, sentence, mask)
    lengths = mask.sum(1).tolist()
    assert float(got) == pytest.approx(ref_jsd_loss(local.tolist(), sentence.tolist(), lengths), rel=1e-10)
    # padding positions are ignored, whatever they hold
    noisy = (
        local + 1e3 * (1 - mask).unsqueeze(-1).double() * torch.randn(b, length, e, generator=gen).double()
    )
    assert float(jsd_local_global_loss(noisy, sentence, mask)) == pytest.approx(float(got), rel=1e-12)


def test_jsd_loss_rewards_a_sentence_matching_its_own_tokens():
    # tokens aligned with their own sentence and against the others: a lower loss than shuffled
    gen = torch.Generator().manual_seed(0)
    sentence = torch.randn(4, 6, generator=gen).double()
    local = sentence.unsqueeze(1).repeat(1, 3, 1)
    mask = torch.ones(4, 3, dtype=torch.long)
    matched = jsd_local_global_loss(local, sentence, mask)
    shuffled = jsd_local_global_loss(local, sentence[[1, 2, 3, 0]], mask)
    assert float(matched) < float(shuffled)


def ref_cnn(cnn: TokenCNN, hidden: torch.Tensor, length: int) -> torch.Tensor:
    """One sentence's CNN outputs from the convolution's definition: window j of kernel k reads
    token t + j - (k - 1) / 2 of the sentence itself, zero beyond its ends; then the mean over t."""
    rows = []
    for t in range(length):
        parts = []
        for conv in cnn.convs:
            assert isinstance(conv, torch.nn.Conv1d) and conv.bias is not None
            weight, bias = conv.weight, conv.bias  # [c, d, k], [c]
            k = weight.shape[2]
            out = bias.clone()
            for j in range(k):
                src = t + j - (k - 1) // 2
                if 0 <= src < length:
                    out = out + weight[:, :, j] @ hidden[src]
            parts.append(torch.relu(out) if cnn.relu else out)
        rows.append(torch.cat(parts))
    return torch.stack(rows).mean(0)


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize(("kernels", "channels"), [((1, 3, 5), 4), ((3,), 2), ((1, 7), 3)])
def test_cnn_shape_masking_and_mean_match_the_loop(relu, kernels, channels):
    torch.manual_seed(0)
    d, b, length = 5, 3, 8
    cnn = TokenCNN(d, kernels, channels, relu).double()
    gen = torch.Generator().manual_seed(1)
    mask = random_mask(b, length, gen)
    hidden = torch.randn(b, length, d, generator=gen).double()
    local = cnn.tokens(hidden, mask)
    assert local.shape == (b, length, len(kernels) * channels) == (b, length, cnn.out_size)
    assert torch.all(local[mask == 0] == 0)
    pooled = cnn(hidden, mask)
    for i, n in enumerate(mask.sum(1).tolist()):
        torch.testing.assert_close(pooled[i], ref_cnn(cnn, hidden[i], n), rtol=1e-10, atol=1e-12)
    # padding never reaches the mean: other values there, or a wider padding, change nothing
    other = hidden + 50.0 * (1 - mask).unsqueeze(-1).double()
    torch.testing.assert_close(cnn(other, mask), pooled, rtol=0, atol=0)
    wider = torch.cat([hidden, torch.randn(b, 4, d, generator=gen).double()], dim=1)
    wide_mask = torch.cat([mask, torch.zeros(b, 4, dtype=torch.long)], dim=1)
    torch.testing.assert_close(cnn(wider, wide_mask), pooled, rtol=1e-12, atol=1e-12)
    if relu:
        assert torch.all(local >= 0)


def test_params_defaults_and_validation():
    p = ISBERTParams()
    assert (p.kernel_sizes, p.channels, p.cnn_activation) == ((1, 3, 5), 256, "none")
    measured = footprint("isbert", p, 64)
    copies = (measured.trained_copies, measured.frozen_copies)
    assert (measured.rows, measured.no_grad_rows, copies) == (1, 0, (0, 0))
    assert "cnn_activation" in ISBERTParams.switches()
    assert "768 dims" in p.describe(384)["sentence_embedding"]
    sizes: tuple[int, ...]
    for sizes in ((2,), (), (1, 4)):
        with pytest.raises(ConfigError, match="kernel_sizes"):
            build_params("isbert", {"kernel_sizes": sizes}).validate()
    with pytest.raises(ConfigError, match="channels"):
        build_params("isbert", {"channels": 0}).validate()
    with pytest.raises(ConfigError, match="cnn_activation"):
        build_params("isbert", {"cnn_activation": "tanh"})


def test_loss_is_the_jsd_of_the_cnn_on_one_token_call(encoder):
    """compute_loss: ONE encoder call for token features, the CNN's tokens as locals, their mean as
    the global vector; gradient reaches the encoder and the CNN."""
    batch = encoder.tokenize(SENTS, 32)
    torch.manual_seed(0)
    method = ISBERT(ISBERTParams(kernel_sizes=(1, 3), channels=8), encoder.hidden_size)
    calls: list[dict[str, Any]] = []

    class Spy(TrainingEncode):
        def __call__(self, batch, **kwargs):
            calls.append({"pooled": True, **kwargs})
            return super().__call__(batch, **kwargs)

        def tokens(self, batch, **kwargs):
            calls.append({"tokens": True, **kwargs})
            return super().tokens(batch, **kwargs)

    encode = Spy(encoder)
    torch.manual_seed(5)
    out = method.compute_loss(encode, batch, 1)
    assert calls == [{"tokens": True}]
    torch.manual_seed(5)
    feats = TrainingEncode(encoder).tokens(batch)
    local = method.cnn.tokens(feats.hidden, feats.attention_mask)
    expected = jsd_local_global_loss(
        local, method.cnn(feats.hidden, feats.attention_mask), feats.attention_mask
    )
    torch.testing.assert_close(out.loss, expected)
    encoder.zero_grad()
    out.loss.backward()
    assert all(p.grad is not None for p in method.cnn.parameters())
    assert encoder.model.embeddings.word_embeddings.weight.grad is not None
    encoder.zero_grad()


def test_evaluation_embedding_is_the_cnn_mean_of_the_encoders_token_states(encoder):
    """The evaluation embedding with the method's head: its CNN over the encoder's last layer (eval
    mode), meaned over each sentence's own tokens, computed here one sentence at a time by hand."""
    torch.manual_seed(0)
    method = ISBERT(ISBERTParams(kernel_sizes=(1, 3, 5), channels=4), encoder.hidden_size).double()
    head = method.sentence_head()
    assert head is method.cnn
    method.float()
    got = encoder.embed(SENTS, "cls_before_pooler", head=head)
    assert got.shape == (len(SENTS), 12)
    assert encoder.training and head.training  # both modes restored
    encoder.eval()
    try:
        with torch.no_grad():
            for i, sentence in enumerate(SENTS):
                one = encoder.tokenize([sentence])
                states = encoder.model(**one).last_hidden_state[0]
                expected = ref_cnn(method.cnn, states, states.shape[0])
                np.testing.assert_allclose(got[i], expected.numpy(), rtol=1e-4, atol=1e-5)
    finally:
        encoder.train()


def test_snapshot_covers_the_cnn():
    torch.manual_seed(0)
    method = ISBERT(ISBERTParams(kernel_sizes=(1, 3), channels=4), 16)
    snap = method.snapshot_state()
    assert {k for k in snap if k.startswith("cnn.")} == {k for k, _ in method.named_parameters()}
    with torch.no_grad():
        for p in method.parameters():
            p.add_(1.0)
    method.restore_state(snap)
    for k, p in method.named_parameters():
        assert torch.equal(p, snap[k])


# -- the training loop --------------------------------------------------------------------------
@pytest.fixture
def loop(monkeypatch: pytest.MonkeyPatch, train_root: Path) -> dict[str, Any]:
    """Fake dev evaluation and final tasks that record the embedding width they are handed."""
    seen: dict[str, Any] = {"dev": [], "final": []}

    class FakeDevEval:
        def __call__(self, embed: Any) -> dict[str, float]:
            x = embed(list(DEV_SENTENCES))
            seen["dev"].append(x.shape[1])
            return dev_scores(x)

        def cache_token(self) -> str:  # cacheable, as the real dev evaluation is
            return "isbert-test-dev-eval"

    def make_dev_eval(data_root: Path, token_lengths: Any = None) -> Any:
        return FakeDevEval()

    def final(embed: Any, data_root: Path, tasks: str, mode: str) -> dict[str, Any]:
        x = embed(list(DEV_SENTENCES))
        seen["final"].append((x.shape[1], dev_scores(x)["stsb_dev"]))
        return {"sts": {"avg": 0.0}}

    monkeypatch.setattr(train_mod, "make_dev_eval", make_dev_eval)
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None, device=None: final)
    seen["root"] = train_root
    return seen


PARAMS = {"kernel_sizes": (1, 3), "channels": 8}


def test_loop_dev_evaluations_and_final_tasks_use_the_head_and_the_best_step(loop, tmp_path):
    root = loop["root"]
    config = resolve_config("isbert", PARAMS, "smoke", {"max_steps": 4, "eval_every": 1}, data_root=root)
    store = RunStore(tmp_path / "runs")
    record = train_run(config, root, store, log=None, save_checkpoint=True)
    assert record["status"] == "finished"
    assert loop["dev"] == [16] * 5  # 2 kernels x 8 channels, not the encoder's 64
    ((width, final_score),) = loop["final"]
    assert width == 16
    assert final_score == pytest.approx(record["best_stsb_dev"], abs=1e-4)  # the best step's encoder AND CNN
    assert "step0_probe_cached" not in record
    assert not any((store.cache_root / CACHE_DIR).glob("**/*"))  # a head's step 0 is not shared
    assert "sentence_embedding" in record["method_notes"]

    # the saved encoder holds the head's weights and the method's name; export and eval refuse it
    folder = store.checkpoint_dir(config.run_id())
    saved = torch.load(folder / SENTENCE_HEAD_FILE, weights_only=True)
    assert saved["method"] == "isbert" and set(saved["state"]) == {
        "convs.0.weight",
        "convs.0.bias",
        "convs.1.weight",
        "convs.1.bias",
    }
    return_code = main(["export", config.run_id(), str(tmp_path / "out"), "--runs-dir", str(store.root)])
    assert return_code == 2 and not (tmp_path / "out").exists()
    return_code = main(["eval", "--model", str(folder), "--output", str(tmp_path / "r.json")])
    assert return_code == 2 and not (tmp_path / "r.json").exists()


def test_export_and_eval_refusals_are_one_line(loop, tmp_path, capsys):
    root = loop["root"]
    overrides = {"max_steps": 1, "eval_every": 1, "final_tasks": "none"}
    config = resolve_config("isbert", PARAMS, "smoke", overrides, data_root=root)
    store = RunStore(tmp_path / "runs")
    train_run(config, root, store, log=None, save_checkpoint=True)
    capsys.readouterr()
    assert main(["export", config.run_id(), str(tmp_path / "out"), "--runs-dir", str(store.root)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "isbert" in err and SENTENCE_HEAD_FILE in err
    folder = str(store.checkpoint_dir(config.run_id()))
    assert main(["eval", "--model", folder, "--output", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "harness eval" in err and "Traceback" not in err


def test_a_method_without_a_head_shares_its_step0_dev_evaluation_and_saves_no_head_file(loop, tmp_path):
    """The other side of the two tests above (they can fail): SimCSE caches step 0 and its saved
    encoder has no head file."""
    root = loop["root"]
    config = resolve_config("simcse", None, "smoke", {"max_steps": 1, "eval_every": 1}, data_root=root)
    store = RunStore(tmp_path / "runs")
    train_run(config, root, store, log=None, save_checkpoint=True)
    assert loop["dev"] == [64, 64]
    assert any((store.cache_root / CACHE_DIR).glob("**/*"))
    assert not (store.checkpoint_dir(config.run_id()) / SENTENCE_HEAD_FILE).exists()
