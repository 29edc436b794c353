"""The training loop and ``harness train`` on the tiny random encoder (seconds per run).

The STS-B dev probe and the final evaluation are replaced by small deterministic fakes (a function of
the embeddings of four fixed sentences), so these tests exercise the loop, not the evaluator; one
test runs the real probe when the evaluator is importable.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harness.run.training as train_mod
from harness.config.run_config import RunConfig, resolve_config
from harness.errors import DataError, TrainingError
from harness.run.data import batches, read_corpus
from harness.run.step import linear_schedule
from harness.run.training import train_run
from harness.store.run_store import RunStore
from methods import REGISTRY
from methods.base import EncodeFn, LossOutput
from methods.simcse import SimCSE

PROBE_SENTENCES = [
    "a man is playing a guitar .",
    "a man plays the guitar .",
    "a woman is slicing an onion .",
    "the cat sleeps on the sofa .",
]
CORPUS = [
    f"the {w} number {i} walks to the {v} ."
    for i, (w, v) in enumerate(zip(["dog", "cat"] * 40, ["park", "shop"] * 40))
]


def fake_probe(
    data_root: Path, token_lengths: Any = None
) -> Callable[[Callable[[list[str]], np.ndarray]], dict[str, float]]:
    def probe(embed: Callable[[list[str]], np.ndarray]) -> dict[str, float]:
        x = embed(list(PROBE_SENTENCES)).astype(np.float64)
        assert x.shape[0] == len(PROBE_SENTENCES)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        sq = ((x[:, None] - x[None]) ** 2).sum(-1)
        iu = np.triu_indices(len(x), 1)
        return {
            "stsb_dev": float(100 * (x[0] @ x[1] - x[2] @ x[3])),
            "align": float(sq[0, 1]),
            "uniform": float(np.log(np.exp(-2 * sq[iu]).mean())),
        }

    return probe


def fake_final(
    embed: Callable[[list[str]], np.ndarray], data_root: Path, tasks: str, mode: str
) -> dict[str, Any]:
    x = embed(list(PROBE_SENTENCES))
    return {"sts": {"STSB": float(x[0] @ x[1]), "avg": float(x[0] @ x[1])}, "tasks": tasks, "mode": mode}


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(train_mod, "make_probe", fake_probe)
    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: fake_final)


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "corpus").mkdir(parents=True)
    (root / "corpus" / "nli-sentences.txt").write_text("\n".join(CORPUS) + "\n")
    return root


def smoke(data_root: Path, method: str = "simcse", **overrides: Any) -> RunConfig:
    return resolve_config(method, overrides.pop("params", None), "smoke", overrides, data_root=data_root)


# -- data -----------------------------------------------------------------------------------------
def test_read_corpus(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_bytes(b"one .\r\ntwo .\nthree .\n")
    assert read_corpus(path, 3) == ["one .", "two .", "three ."]
    path.write_bytes(b"one .\ntwo .")  # no final newline
    assert read_corpus(path) == ["one .", "two ."]


def test_empty_lines_are_a_data_error_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("one .\ntwo .\n\nthree .\n   \n")
    with pytest.raises(DataError, match=r"line 3 is empty \(2 empty"):
        read_corpus(path)


def test_too_few_sentences_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "c.txt"
    path.write_text("one .\ntwo .\n")
    with pytest.raises(DataError, match="fewer than one batch of 8"):
        read_corpus(path, 8)
    path.write_bytes(b"\xff\xfe bad")
    with pytest.raises(DataError, match="UTF-8"):
        read_corpus(path)


def test_batches_are_seeded_full_and_reshuffled() -> None:
    sentences = [str(i) for i in range(10)]
    stream = batches(sentences, 4, seed=1)
    first = [next(stream) for _ in range(4)]  # two epochs of two full batches (2 dropped each)
    assert all(len(b) == 4 for b in first)
    assert len(set(first[0] + first[1])) == 8
    assert first[:2] != first[2:]
    again = batches(sentences, 4, seed=1)
    assert [next(again) for _ in range(4)] == first
    other = batches(sentences, 4, seed=2)
    assert [next(other) for _ in range(4)] != first


def test_adamw_is_fused_where_it_can_be_and_updates_as_the_default_does() -> None:
    from harness.run.step import make_adamw

    torch.manual_seed(0)
    start = [torch.randn(30, 20), torch.randn(20)]
    fused = [torch.nn.Parameter(t.clone()) for t in start]
    plain = [torch.nn.Parameter(t.clone()) for t in start]
    opt = make_adamw(fused, 1e-2, 0.01)
    ref = torch.optim.AdamW(plain, lr=1e-2, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-8)
    assert opt.defaults["fused"] and not ref.defaults["fused"]
    for _ in range(5):
        grads = [torch.randn_like(t) for t in start]
        for a, b, g in zip(fused, plain, grads):
            a.grad, b.grad = g.clone(), g.clone()
        opt.step()
        ref.step()
    for a, b, t in zip(fused, plain, start):
        assert (a - t).abs().max() > 1e-3  # it moved
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # a dtype without a fused kernel here: the default implementation
    doubles = [torch.nn.Parameter(torch.randn(3, dtype=torch.float64))]
    assert not make_adamw(doubles, 1e-2, 0.0).defaults["fused"]


def test_linear_schedule() -> None:
    f = linear_schedule(10)
    assert [f(s) for s in (0, 5, 10, 12)] == [1.0, 0.5, 0.0, 0.0]
    g = linear_schedule(10, warmup=2)
    assert [g(s) for s in (0, 1, 2, 6, 10)] == [0.0, 0.5, 1.0, 0.5, 0.0]


# -- runs -----------------------------------------------------------------------------------------
def test_smoke_run_end_to_end_and_deterministic(fakes: None, data_root: Path, tmp_path: Path) -> None:
    config = smoke(data_root)
    store = RunStore(tmp_path / "runs")
    lines: list[str] = []
    record = train_run(config, data_root, store, device="cpu", log=lines.append)
    assert record["status"] == "finished" and record["error"] is None
    assert record["run_id"] == config.run_id() and record["group_id"] == config.group_id()
    assert record["config"] == config.to_dict()
    assert [p["step"] for p in record["trajectory"]] == [0, 2, 4]
    first = record["trajectory"][0]
    assert first["loss"] is None and first["lr"] == pytest.approx(3e-5)
    for point in record["trajectory"][1:]:
        assert math.isfinite(point["loss"]) and {"stsb_dev", "align", "uniform", "lr"} <= set(point)
    assert record["trajectory"][-1]["lr"] == 0.0
    best = max(record["trajectory"][1:], key=lambda p: p["stsb_dev"])
    assert (record["best_step"], record["best_stsb_dev"]) == (best["step"], best["stsb_dev"])
    assert record["final"]["tasks"] == "sts" and record["final"]["mode"] == "fasttest"
    for key in ("wall_time_s", "train_time_s", "eval_time_s"):
        assert record[key] > 0
    if Path("/proc/self/status").exists():  # the run's peak resident memory (harness.grid.memory)
        assert 50 < record["peak_rss_mb"] < 64 * 1024
    assert record["started_at"] and record["finished_at"] and record["host"] and record["code_version"]
    assert store.load(config.run_id()) == json.loads(json.dumps(record))
    assert store.finished_ids() == {config.run_id()}
    assert any("step 4/4" in line for line in lines)

    again = train_run(config, data_root, None, device="cpu", log=None)
    strip = ("elapsed_s",)
    assert [{k: v for k, v in p.items() if k not in strip} for p in again["trajectory"]] == [
        {k: v for k, v in p.items() if k not in strip} for p in record["trajectory"]
    ]
    assert again["final"] == record["final"]


def test_final_scores_come_from_the_best_checkpoint(
    fakes: None, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[float] = []

    def final(embed: Callable[[list[str]], np.ndarray], root: Path, tasks: str, mode: str) -> dict[str, Any]:
        seen.append(fake_probe(root)(embed)["stsb_dev"])
        return {"sts": {"avg": 0.0}}

    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final)
    record = train_run(smoke(data_root, max_steps=3, eval_every=1), data_root, log=None)
    assert seen == [pytest.approx(record["best_stsb_dev"], abs=1e-4)]


def test_zero_steps_only_evaluates(fakes: None, data_root: Path) -> None:
    record = train_run(smoke(data_root, max_steps=0), data_root, log=None)
    assert [p["step"] for p in record["trajectory"]] == [0]
    assert record["best_step"] == 0 and record["status"] == "finished"


def test_post_whitening_whitens_the_final_embeddings(
    fakes: None, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    captured: dict[str, np.ndarray] = {}

    def final(embed: Callable[[list[str]], np.ndarray], root: Path, tasks: str, mode: str) -> dict[str, Any]:
        captured["x"] = embed(CORPUS[:80]).astype(np.float64)
        return {}

    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final)
    config = smoke(data_root, max_steps=0, post_whiten="zca", post_whiten_sentences=80)
    train_run(config, data_root, log=None)
    # With no training the encoder is the seeded random one: whitening must be fitted on the first 80
    # corpus sentences and applied to the evaluation embeddings.
    from harness.encoder.loading import load_encoder
    from methods.whitening import apply_post_whitening, fit_post_whitening

    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads or threads)  # as the run embedded: ZCA magnifies rounding
    try:
        raw = load_encoder("random:tiny", "cpu", seed=config.seed).embed(CORPUS[:80])
    finally:
        torch.set_num_threads(threads)
    mu, w = fit_post_whitening(raw, "zca")
    assert not np.allclose(captured["x"], raw, atol=1e-3)
    np.testing.assert_allclose(captured["x"], apply_post_whitening(raw, mu, w), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kind", ["flow", "flow_glow"])
def test_post_flow_evaluates_the_flows_latents(
    fakes: None, data_root: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    captured: dict[str, np.ndarray] = {}

    def final(embed: Callable[[list[str]], np.ndarray], root: Path, tasks: str, mode: str) -> dict[str, Any]:
        captured["z"] = embed(CORPUS[:80])
        return {}

    monkeypatch.setattr(train_mod, "make_final_evaluator", lambda token_lengths=None: final)
    config = smoke(data_root, max_steps=0, post_whiten=kind, post_whiten_sentences=80, seed=7)
    record = train_run(config, data_root, log=None)
    assert record["status"] == "finished"
    # No training: the flow is fitted (seeded by the run's seed) on the seeded random encoder's
    # embeddings of the first 80 corpus sentences, and the final tasks score its latents.
    from harness.encoder.loading import load_encoder
    from methods.flow import READINGS, fit_flow

    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads or threads)
    try:
        raw = load_encoder("random:tiny", "cpu", seed=config.seed).embed(CORPUS[:80])
    finally:
        torch.set_num_threads(threads)
    fitted = fit_flow(raw, READINGS[kind], seed=config.seed)
    assert not np.allclose(captured["z"], raw, atol=1e-3)
    np.testing.assert_allclose(captured["z"], fitted.transform(raw), rtol=1e-4, atol=1e-4)


class NanAtStep3(SimCSE):
    name = "nan_at_3"

    def compute_loss(self, encode: EncodeFn, batch: dict[str, torch.Tensor], step: int) -> LossOutput:
        out = super().compute_loss(encode, batch, step)
        if step == 3:
            out.loss = out.loss * float("nan")
        return LossOutput(out.loss, {"extra_metric": 1.0})


def test_nan_loss_writes_a_failed_record_naming_the_step(
    fakes: None, data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(REGISTRY, "nan_at_3", NanAtStep3)
    config = smoke(data_root, method="nan_at_3", eval_every=1)
    store = RunStore(tmp_path / "runs")
    with pytest.raises(TrainingError, match="step 3"):
        train_run(config, data_root, store, log=None)
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed" and "step 3" in saved["error"]
    assert [p["step"] for p in saved["trajectory"]] == [0, 1, 2]
    assert saved["trajectory"][1]["extra_metric"] == 1.0
    assert saved["finished_at"] is not None and store.finished_ids() == set()
    assert "peak_rss_mb" in saved or not Path("/proc/self/status").exists()


def test_bad_corpus_fails_the_record(fakes: None, data_root: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "short.txt"
    corpus.write_text("one .\ntwo .\n")
    config = smoke(data_root, corpus=str(corpus))
    store = RunStore(tmp_path / "runs")
    with pytest.raises(DataError, match="fewer than one batch"):
        train_run(config, data_root, store, log=None)
    saved = store.load(config.run_id())
    assert saved is not None and saved["status"] == "failed" and "fewer than one batch" in saved["error"]


@pytest.mark.slow
def test_real_probe_when_the_evaluator_exists(data_root: Path) -> None:
    from harness.config.paths import resolve_data_root

    try:
        real_root = resolve_data_root(None)
    except Exception:
        pytest.skip("no data root with SentEval data")
    config = smoke(data_root, max_steps=2, eval_every=2, final_tasks="none")
    record = train_run(config, real_root, log=None)
    for point in record["trajectory"]:
        assert -100 <= point["stsb_dev"] <= 100 and point["align"] >= 0 and point["uniform"] <= 0


# -- the command line -----------------------------------------------------------------------------
def test_cli_train_smoke(
    fakes: None, data_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.cli import main

    out_dir = tmp_path / "runs"
    argv = ["train", "--profile", "smoke", "--data-dir", str(data_root), "--output-dir", str(out_dir)]
    code = main([*argv, "--max-steps", "2", "--set", "temperature=0.1", "--save-checkpoint"])
    text = capsys.readouterr().out
    assert code == 0
    records = RunStore(out_dir).records()
    assert len(records) == 1 and records[0]["config"]["params"]["temperature"] == 0.1
    assert records[0]["config"]["max_steps"] == 2
    assert f"record: {out_dir / 'records' / records[0]['run_id']}.json" in text
    assert "final sts: STSB" in text
    assert (out_dir / "checkpoints" / records[0]["run_id"] / "config.json").is_file()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "temperature"], "--set expects KEY=VALUE"),
        (["--set", "temprature=1"], "did you mean 'temperature'"),
        (["--method", "simcs"], "unknown method 'simcs'"),
        (["--profile", "gpu"], "unknown profile 'gpu'"),
    ],
)
def test_cli_errors_are_one_line(
    data_root: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    from harness.cli import main

    code = main(["train", "--profile", "smoke", "--data-dir", str(data_root), *args])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_records_carry_provenance_schema_and_method_notes(
    fakes: None, data_root: Path, tmp_path: Path
) -> None:
    import transformers

    from harness.config.hardware import cpu_id, cpu_model
    from harness.store.record import SCHEMA_VERSION

    config = smoke(data_root, "whitenedcse", max_steps=2, eval_every=2)
    assert config.threads == 1
    record = train_run(config, data_root, RunStore(tmp_path / "runs"), num_threads=2, log=None)
    assert record["schema_version"] == SCHEMA_VERSION == 4
    prov = record["provenance"]
    assert prov is not None
    assert prov["threads"] == 1  # the config's thread count wins over the caller's
    assert prov["torch"] == torch.__version__ and prov["transformers"] == transformers.__version__
    assert prov["numpy"] == np.__version__ and prov["python"].count(".") == 2
    assert prov["device"] == "cpu" and prov["device_name"] == cpu_model() and prov["gpu_name"] is None
    assert prov.get("cpu_id") == cpu_id()
    assert isinstance(prov["code_dirty"], bool | None)
    assert record["method_notes"] == {"groups": "32 groups of 2 channels at d=64"}


def test_bf16_on_a_cpu_that_emulates_it_is_announced(
    fakes: None, data_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines: list[str] = []
    monkeypatch.setattr(train_mod, "cpu_bf16_slowdown", lambda: 40.0)
    train_run(smoke(data_root, max_steps=1, eval_every=1, precision="bf16"), data_root, log=lines.append)
    assert any("bf16 matmuls are emulated on this CPU (40x slower" in line for line in lines)
    lines.clear()
    monkeypatch.setattr(train_mod, "cpu_bf16_slowdown", lambda: 1.1)
    train_run(smoke(data_root, max_steps=1, eval_every=1, precision="bf16"), data_root, log=lines.append)
    assert not any("emulated" in line for line in lines)
    lines.clear()
    monkeypatch.setattr(train_mod, "cpu_bf16_slowdown", lambda: 40.0)
    train_run(smoke(data_root, max_steps=1, eval_every=1, eval_precision="bf16"), data_root, log=lines.append)
    assert any("bf16 matmuls are emulated on this CPU (40x slower" in line for line in lines)


@pytest.mark.parametrize(("precision", "eval_precision"), [("bf16", "fp32"), ("fp32", "bf16")])
def test_dev_probes_use_the_training_precision_and_final_tasks_their_own(
    fakes: None, data_root: Path, monkeypatch: pytest.MonkeyPatch, precision: str, eval_precision: str
) -> None:
    from harness.encoder.model import SentenceEncoder

    seen: list[str] = []
    real_embed = SentenceEncoder.embed

    def spy(self: SentenceEncoder, sentences: Any, pooler: str = "cls_before_pooler", p: str = "fp32") -> Any:
        seen.append(p)
        return real_embed(self, sentences, pooler, p)

    monkeypatch.setattr(train_mod, "cpu_bf16_slowdown", lambda: 1.0)
    monkeypatch.setattr(SentenceEncoder, "embed", spy)
    config = smoke(data_root, max_steps=2, eval_every=1, precision=precision, eval_precision=eval_precision)
    train_run(config, data_root, log=lambda _: None)
    # fake_probe embeds once per probe (steps 0, 1, 2); fake_final embeds once at the end
    assert seen == [precision] * 3 + [eval_precision]
