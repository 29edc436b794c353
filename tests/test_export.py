"""``harness export``: a saved run loads in transformers and sentence-transformers with its dev score."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.cli import main
from harness.config.paths import senteval_dir
from harness.config.run_config import resolve_config
from harness.encoder.loading import load_encoder
from harness.evaluation.geometry import StsbDevProbe
from harness.run.training import train_run
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
    probe = StsbDevProbe(senteval_dir(root))

    model = AutoModel.from_pretrained(str(out)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(out))

    def hf_embed(batch: list[str]) -> np.ndarray:
        with torch.inference_mode():
            tokens = tokenizer(batch, padding=True, return_tensors="pt")
            return model(**tokens).last_hidden_state[:, 0].float().numpy()

    # the exported weights are the record's best state: the harness's own forward gives its score
    ours = load_encoder(str(out))
    assert probe(lambda b: ours.embed(b))["stsb_dev"] == pytest.approx(best, abs=1e-4)
    # transformers' plain forward gives the same embeddings (the harness computes the last layer at
    # [CLS] only: equal up to float rounding, which can move a random model's near-tied ranks)
    sentences = probe.sentences[:200]
    np.testing.assert_allclose(hf_embed(sentences), ours.embed(sentences), atol=1e-5)
    st = SentenceTransformer(str(out), device="cpu")

    def st_embed(batch: list[str]) -> np.ndarray:
        return np.asarray(st.encode(batch, batch_size=len(batch), convert_to_numpy=True))

    assert probe(st_embed)["stsb_dev"] == pytest.approx(probe(hf_embed)["stsb_dev"], abs=1e-4)


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
    shutil.rmtree(store.checkpoint_dir(run_id))
    assert main(["export", run_id, str(tmp_path / "b"), *runs]) == 2
    assert "--save-model" in capsys.readouterr().err
