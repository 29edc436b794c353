"""``harness export``'s job (harness.jobs.export) without a model: what sentence-transformers cannot
reproduce refused with one line, the base model a card names, the card's settings and scores, and the
run summary beside it without the training machine's paths. (A real export, scored through
sentence-transformers: tests/commands/test_export_cmd.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.jobs.export import base_model, check_exportable, model_card, run_summary

WHITENING = ("zca", np.zeros((1, 4)), np.eye(4))


def record(**config: Any) -> dict[str, Any]:
    return {
        "run_id": "simcse-abc",
        "status": "finished",
        "best_step": 250,
        "best_stsb_dev": 81.234,
        "final": {"sts": {"STS12": 60.5, "avg": 70.0}, "transfer": {"MR": 80.25, "note": "text"}},
        "provenance": {"device": "cpu"},
        "config": {
            "method": "simcse",
            "model": "minilm",
            "corpus": "/home/someone/corpus.txt",
            "corpus_id": "nli-sentences.txt:0123abcd",
            "max_steps": 1000,
            "seed": 42,
            "params": {"temperature": 0.05, "mlp": True},
            **config,
        },
    }


@pytest.mark.parametrize(
    ("config", "whitening", "message"),
    [
        ({"eval_pooler": "avg_first_last"}, None, "pooler 'avg_first_last' reads inner layers"),
        ({"post_whiten": "flow_glow"}, None, "post_whiten=flow_glow, a normalising flow"),
        ({"post_whiten": "zca"}, None, "post_whiten=zca, but its checkpoint holds no fitted whitening"),
        ({"post_whiten": "pca"}, WHITENING, "post_whiten=pca, but its checkpoint holds no fitted whitening"),
    ],
)
def test_what_no_module_list_reproduces_is_refused(
    config: dict[str, str], whitening: Any, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_exportable(record(**config), whitening)


def test_the_pooler_of_an_exportable_run() -> None:
    assert check_exportable(record(), None) == "cls_before_pooler"
    assert check_exportable(record(eval_pooler="avg", post_whiten="zca"), WHITENING) == "avg"
    assert base_model("minilm") == "sentence-transformers/all-MiniLM-L6-v2"
    assert base_model("random:tiny") is None and base_model("/models/bert") == "/models/bert"


def test_the_card_names_the_base_model_the_settings_and_the_records_scores() -> None:
    card = model_card(record(post_whiten_sentences=2000), "Gao et al., 2021", "cls", "zca")
    assert "base_model: sentence-transformers/all-MiniLM-L6-v2" in card and "- simcse" in card
    assert "# simcse on sentence-transformers/all-MiniLM-L6-v2 (simcse-abc)" in card
    assert "cls pooling and the trained head (Dense, Tanh), then zca whitening fitted on 2000" in card
    assert "- **Selected checkpoint:** step 250 of 1000, by STS-B dev" in card
    assert "- corpus: nli-sentences.txt (content hash 0123abcd)" in card
    assert "- method parameters: mlp=yes, temperature=0.05" in card
    assert "| dev | STS-B dev (best checkpoint) | 81.23 | Spearman x 100 |" in card
    assert (
        "| sts | STS12 | 60.50 | Spearman x 100 |" in card
        and "| transfer | MR | 80.25 | accuracy, % |" in card
    )
    assert "note" not in card  # only numbers are scores
    random = model_card(record(model="random:tiny", max_steps=None), "c", "avg", None)
    assert "base_model:" not in random and "- **Base model:** random:tiny (random weights)" in random
    # the base encoder's license travels with it; random weights have none to carry
    assert "license: apache-2.0" in card and "license:" not in random
    assert "mean pooling; cosine similarity" in random and "- steps: one epoch" in random


def test_the_license_comes_from_the_known_encoders_or_a_local_folder_s_card(tmp_path: Path) -> None:
    from harness.jobs.export import base_license

    assert base_license("minilm") == "apache-2.0" and base_license("roberta-base") == "mit"
    assert base_license("random:bert-base") is None and base_license(str(tmp_path)) is None
    (tmp_path / "README.md").write_text("---\nlanguage: en\nlicense: cc-by-4.0\n---\n# a model\n")
    assert base_license(str(tmp_path)) == "cc-by-4.0"


def test_the_run_summary_keeps_no_path_of_the_training_machine() -> None:
    about = run_summary(record())
    assert set(about) == {"run_id", "config", "best_step", "best_stsb_dev", "final", "provenance"}
    assert "corpus" not in about["config"] and about["config"]["corpus_id"] == "nli-sentences.txt:0123abcd"
    assert "status" not in about
