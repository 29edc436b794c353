"""``harness export``: a saved run loads in transformers and sentence-transformers with its dev score;
the exported folder embeds as the run was scored (each pooler, BERT-whitening as a layer), ``harness
eval`` on it honours its pooling and layers, its model card says what it is, and a flow is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from harness.cli import main
from harness.config.paths import senteval_dir
from harness.encoder.loading import load_encoder
from harness.evaluation.geometry import StsbDevEval
from harness.evaluation.runner import run_evaluation
from harness.run.training import train_run
from harness.store.run_config import resolve_config
from harness.store.run_store import RunStore


@pytest.fixture
def trained(tmp_path: Path, mini_data_root: Path, data_root: Path) -> tuple[RunStore, str, Path, float]:
    root = tmp_path / "data"
    shutil.copytree(mini_data_root, root)
    (root / "corpus").mkdir()
    shutil.copy(data_root / "corpus" / "nli-sentences.txt", root / "corpus" / "nli-sentences.txt")
    config = resolve_config(
        "simcse", None, "smoke", {"max_steps": 2, "eval_every": 2, "final_tasks": "none"}, root
    )
    store = RunStore(tmp_path / "runs")
    record = train_run(config, root, store, log=None, save_checkpoint=True)
    return store, config.run_id(), root, float(record["best_stsb_dev"] or 0.0)


def test_export_loads_in_transformers_and_sentence_transformers(
    trained: tuple[RunStore, str, Path, float], tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    store, run_id, root, best = trained
    out = tmp_path / "exported"
    assert main(["export", run_id, str(out), "--runs-dir", str(store.root)]) == 0
    dev_eval = StsbDevEval(senteval_dir(root))

    model = AutoModel.from_pretrained(str(out)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(out))

    def hf_embed(batch: list[str]) -> np.ndarray:
        with torch.inference_mode():
            tokens = tokenizer(batch, padding=True, return_tensors="pt")
            return model(**tokens).last_hidden_state[:, 0].float().numpy()

    # the exported weights are the record's best state: the harness's own forward gives its score
    ours = load_encoder(str(out))
    assert dev_eval(lambda b: ours.embed(b))["stsb_dev"] == pytest.approx(best, abs=1e-4)
    # transformers' plain forward gives the same embeddings (the harness computes the last layer at
    # [CLS] only: equal up to float rounding, which can move a random model's near-tied ranks)
    sentences = dev_eval.sentences[:200]
    np.testing.assert_allclose(hf_embed(sentences), ours.embed(sentences), atol=1e-5)
    st = SentenceTransformer(str(out), device="cpu")

    def st_embed(batch: list[str]) -> np.ndarray:
        return np.asarray(st.encode(batch, batch_size=len(batch), convert_to_numpy=True))

    assert dev_eval(st_embed)["stsb_dev"] == pytest.approx(dev_eval(hf_embed)["stsb_dev"], abs=1e-4)


OTHER_SENTENCE_TRANSFORMERS = ("3.0.1", "5.1.2")
"""The oldest supported release and the last 5.x; the installed one (6.x) is tested above."""


@pytest.mark.parametrize("version", OTHER_SENTENCE_TRANSFORMERS)
def test_export_loads_in_older_sentence_transformers(
    trained: tuple[RunStore, str, Path, float], tmp_path: Path, version: str
) -> None:
    """The export loads in sentence-transformers 3.x and 5.x and embeds as the installed 6.x does.
    Each release is installed (without its dependencies: this torch and transformers) into a
    throwaway folder from the package index; where the index cannot be reached the test skips."""
    from sentence_transformers import SentenceTransformer

    store, run_id, root, _best = trained
    out = tmp_path / "exported"
    assert main(["export", run_id, str(out), "--runs-dir", str(store.root)]) == 0
    target = tmp_path / f"st-{version}"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
    installed = subprocess.run(
        [*pip, f"sentence-transformers=={version}"], capture_output=True, text=True, timeout=300
    )
    if installed.returncode:
        pytest.skip(f"sentence-transformers {version} not installable here: {installed.stderr[-300:]}")
    sentences = StsbDevEval(senteval_dir(root)).sentences[:64]
    (tmp_path / "sentences.json").write_text(json.dumps(sentences), encoding="utf-8")
    script = (
        "import json, sys, numpy as np, sentence_transformers as st\n"
        "from sentence_transformers import SentenceTransformer\n"
        "model = SentenceTransformer(sys.argv[1], device='cpu')\n"
        "text = json.load(open(sys.argv[2], encoding='utf-8'))\n"
        "np.save(sys.argv[3], model.encode(text, batch_size=len(text), convert_to_numpy=True))\n"
        "print(st.__version__)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), os.environ.get("PYTHONPATH", "")])}
    embedded = tmp_path / "older.npy"
    run = subprocess.run(
        [sys.executable, "-c", script, str(out), str(tmp_path / "sentences.json"), str(embedded)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == version  # that release, not the installed one
    newest = SentenceTransformer(str(out), device="cpu").encode(sentences, convert_to_numpy=True)
    np.testing.assert_allclose(np.load(embedded), newest, atol=1e-5)


def test_export_errors_name_the_problem(
    trained: tuple[RunStore, str, Path, float], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, run_id, _root, _best = trained
    runs = ["--runs-dir", str(store.root)]
    assert main(["export", run_id[:-1] + "x", str(tmp_path / "a"), *runs]) == 2
    assert "did you mean" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "file").write_text("x")
    assert main(["export", run_id, str(busy), *runs]) == 2
    assert "not an empty folder" in capsys.readouterr().err
    # never into the runs' saved encoders (its own checkpoint or another's), by a path or a link
    checkpoint = store.checkpoint_dir(run_id)
    link = tmp_path / "link"
    link.symlink_to(checkpoint.parent)
    for inside in (checkpoint / "export", checkpoint.parent / "other-run", link / "x"):
        before = sorted(p.name for p in checkpoint.iterdir())
        assert main(["export", run_id, str(inside), *runs]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"harness export: error: {inside} is inside {checkpoint.parent}, the runs' saved encoders: "
            "export to a folder outside it\n"
        )
        assert not inside.exists() and sorted(p.name for p in checkpoint.iterdir()) == before
    shutil.rmtree(store.checkpoint_dir(run_id))
    assert main(["export", run_id, str(tmp_path / "b"), *runs]) == 2
    assert "--save-model" in capsys.readouterr().err


# -- faithful: the exported folder embeds as the run was scored ----------------------------------------
# ``harness export`` is faithful: the exported sentence-transformers folder embeds as the run was
# scored, for each pooler and with BERT-whitening (pca, zca) carried as a layer; ``harness eval`` on
# that folder honours its pooling and layers; the model card says what the model is; what cannot be
# carried (a flow) is refused with one line and exit 2.
#
# Each case trains a two-step smoke run (a tiny random BERT) with ``--save-model`` on the mini data
# root and then scores the exported folder through sentence-transformers itself (its own tokenizer,
# modules and forward) with the harness's STS-B dev evaluation and STS evaluator. STS-B is whole
# (1,500 dev and 1,379 test pairs), so that a score compares embeddings rather than a few near-tied
# ranks of a random model; the other STS files are cut short for speed. Through
# sentence-transformers' forward (the harness computes the last layer at [CLS] only) the embeddings
# agree to float rounding, which moves a random model's near-tied ranks: its scores agree to 0.05
# (``harness eval`` on the folder too: the run scored with its training copy of the encoder, whose
# CPU kernels round differently).


@pytest.fixture(scope="module")
def root(mini_data_root: Path, data_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The mini data root with the whole STS-B and a 2,000-sentence corpus (enough to fit a d = 64
    whitening)."""
    folder = tmp_path_factory.mktemp("export_data")
    shutil.copytree(mini_data_root / "senteval", folder / "senteval")
    stsb = folder / "senteval" / "STS" / "STSBenchmark"
    shutil.rmtree(stsb)
    shutil.copytree(data_root / "senteval" / "STS" / "STSBenchmark", stsb)
    (folder / "corpus").mkdir()
    lines = (data_root / "corpus" / "nli-sentences.txt").read_text(encoding="utf-8").splitlines()[:2000]
    (folder / "corpus" / "nli-sentences.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def _train(root: Path, runs: Path, **settings: Any) -> dict[str, Any]:
    overrides = {"max_steps": 2, "eval_every": 2, "final_tasks": "sts", "post_whiten_sentences": 2000}
    config = resolve_config("simcse", None, "smoke", {**overrides, **settings}, root)
    return dict(train_run(config, root, RunStore(runs), log=None, save_checkpoint=True))


def _run_embed(runs: Path, record: dict[str, Any], root: Path) -> Any:
    """The run's own final embedding from its saved encoder: its pooler, then its whitening."""
    from harness.encoder.loading import load_encoder
    from harness.encoder.saved import load_post_whitening
    from harness.evaluation.runner import encoder_functions
    from harness.run.hooks import whiten_with

    folder = RunStore(runs).checkpoint_dir(record["run_id"])
    embed, _lengths = encoder_functions(load_encoder(str(folder)), record["config"]["eval_pooler"])
    whitening = load_post_whitening(folder)
    return embed if whitening is None else whiten_with(embed, whitening[1], whitening[2])


def _cosines(x: np.ndarray) -> np.ndarray:
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    return unit @ unit.T


def _st_embed(folder: Path) -> Any:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(folder), device="cpu")

    def embed(batch: list[str]) -> np.ndarray:
        return np.asarray(model.encode(batch, batch_size=len(batch), convert_to_numpy=True))

    return embed


@pytest.mark.parametrize(
    ("settings", "modules"),
    [
        ({"eval_pooler": "cls_before_pooler"}, ["Transformer", "Pooling"]),
        ({"eval_pooler": "avg", "train_pooler": "avg"}, ["Transformer", "Pooling"]),
        ({"eval_pooler": "cls", "train_pooler": "cls"}, ["Transformer", "Pooling", "Dense"]),
        ({"post_whiten": "pca"}, ["Transformer", "Pooling", "Dense", "Dense"]),
        ({"post_whiten": "zca"}, ["Transformer", "Pooling", "Dense", "Dense"]),
    ],
    ids=["cls_before_pooler", "avg", "cls", "pca", "zca"],
)
def test_the_exported_model_scores_what_the_record_says(
    root: Path, tmp_path: Path, settings: dict[str, str], modules: list[str]
) -> None:
    record = _train(root, tmp_path / "runs", **settings)
    out = tmp_path / "exported"
    assert main(["export", record["run_id"], str(out), "--runs-dir", str(tmp_path / "runs")]) == 0
    listed = json.loads((out / "modules.json").read_text(encoding="utf-8"))
    assert [m["type"].rsplit(".", 1)[-1] for m in listed] == modules
    # the layout sentence-transformers 3.x to 6.x all load (5.1.2 and 6.2.0 tried: the same
    # embeddings): the module paths of before 6, and no config key a module of before 6 refuses
    assert all(m["type"] == f"sentence_transformers.models.{m['type'].rsplit('.', 1)[-1]}" for m in listed)
    for module in listed[1:]:
        config = json.loads((out / module["path"] / "config.json").read_text(encoding="utf-8"))
        assert not {"module_input_name", "module_output_name", "pooling_mode"} & set(config), config
    transformer = json.loads((out / "sentence_bert_config.json").read_text(encoding="utf-8"))
    assert set(transformer) == {"max_seq_length", "do_lower_case"}

    embed = _st_embed(out)
    final = run_evaluation(embed, root, "STSBenchmark").results["sts"]["STSBenchmark"]
    # whitened if it was; within 0.1 points: the random tiny encoder's cosines lie close together, so
    # float rounding between the two forwards (sentence-transformers' full last layer against the
    # harness's [CLS]-only one) reorders a few pairs (0.051 seen with the "cls" pooler)
    assert final == pytest.approx(record["final"]["sts"]["STSBenchmark"], abs=0.1)
    dev_eval = StsbDevEval(senteval_dir(root))
    sentences = dev_eval.sentences[:300]
    ours = _run_embed(tmp_path / "runs", record, root)
    # what the scores read: the cosine of every two sentences (whitening stretches the directions of
    # least variance, so single coordinates there differ more than the cosines do)
    np.testing.assert_allclose(_cosines(embed(sentences)), _cosines(ours(sentences)), atol=2e-3)
    if "post_whiten" not in settings:  # the dev evaluation scores the unwhitened embedding
        assert dev_eval(embed)["stsb_dev"] == pytest.approx(record["best_stsb_dev"], abs=0.05)

    # harness eval on the folder pools and transforms as the folder says (no --pooler given)
    result = tmp_path / "eval.json"
    argv = ["eval", "--model", str(out), "--tasks", "STSBenchmark", "--data-dir", str(root)]
    assert main([*argv, "--output", str(result)]) == 0
    scored = json.loads(result.read_text(encoding="utf-8"))
    assert scored["sts"]["STSBenchmark"] == pytest.approx(record["final"]["sts"]["STSBenchmark"], abs=0.1)
    assert scored["meta"]["pooler"] == {"avg": "avg"}.get(
        settings.get("eval_pooler", ""), "cls_before_pooler"
    )

    card = (out / "README.md").read_text(encoding="utf-8")
    assert "Base model:** random:tiny (random weights)" in card
    assert f"| sts | avg | {record['final']['sts']['avg']:.2f} |" in card
    assert f"| dev | STS-B dev (best checkpoint) | {record['best_stsb_dev']:.2f} |" in card
    assert "- seed: 42" in card or f"- seed: {record['config']['seed']}" in card
    assert "Unknown" not in card
    about = json.loads((out / "harness_run.json").read_text(encoding="utf-8"))
    assert "corpus" not in about["config"]  # no path of the training machine


def test_a_flow_is_refused_with_one_line(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = _train(root, tmp_path / "runs", post_whiten="flow", final_tasks="none")
    out = tmp_path / "exported"
    assert main(["export", record["run_id"], str(out), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "post_whiten=flow" in err[0] and "nothing exported" in err[0]
    assert not out.exists()


def test_a_whitened_run_saved_without_its_whitening_is_refused(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from harness.encoder.saved import POST_WHITENING_FILE

    record = _train(root, tmp_path / "runs", post_whiten="zca", final_tasks="none")
    (RunStore(tmp_path / "runs").checkpoint_dir(record["run_id"]) / POST_WHITENING_FILE).unlink()
    out = tmp_path / "exported"
    assert main(["export", record["run_id"], str(out), "--runs-dir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no fitted whitening" in err[0]


def test_eval_on_a_mean_pooling_folder_is_not_scored_with_cls(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sentence-transformers folder saved with mean pooling is scored with mean pooling."""
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.base.modules import Transformer
        from sentence_transformers.sentence_transformer.modules import Pooling
    except ImportError:
        from sentence_transformers.models import Pooling, Transformer  # type: ignore[no-redef]

    from harness.encoder.loading import load_encoder

    encoder = load_encoder("random:tiny", seed=3)
    plain = tmp_path / "plain"
    model: Any = encoder.model
    model.save_pretrained(str(plain))
    encoder.tokenizer.save_pretrained(str(plain))
    folder = tmp_path / "st"
    SentenceTransformer(modules=[Transformer(str(plain)), Pooling(64, pooling_mode="mean")]).save(str(folder))
    argv = ["eval", "--model", str(folder), "--tasks", "STSBenchmark", "--data-dir", str(root)]
    assert main([*argv, "--output", str(tmp_path / "a.json")]) == 0
    assert main([*argv, "--pooler", "cls_before_pooler", "--output", str(tmp_path / "c.json")]) == 0
    a, c = (json.loads((tmp_path / f"{x}.json").read_text(encoding="utf-8")) for x in "ac")
    assert a["meta"]["pooler"] == "avg" and c["meta"]["pooler"] == "cls_before_pooler"
    assert a["sts"]["STSBenchmark"] != c["sts"]["STSBenchmark"]
    st = run_evaluation(_st_embed(folder), root, "STSBenchmark").results["sts"]
    assert st["STSBenchmark"] == pytest.approx(a["sts"]["STSBenchmark"], abs=0.02)
