"""``harness export``'s job: a run's saved encoder as a sentence-transformers folder that embeds
exactly as the run was scored, with a model card that says what it is.

The modules reproduce the run's evaluation embedding: its pooler (``cls_before_pooler`` -> CLS
pooling; ``avg`` -> mean pooling; ``cls`` -> CLS pooling and the trained head as ``Dense`` with
Tanh) and, for a run that post-whitened its embeddings (``post_whiten`` zca or pca), the whitening it
fitted as two ``Dense`` layers without activation, ``x - mu`` (identity weight, bias ``-mu``), then
``@ W`` (no bias): linear layers sentence-transformers runs as they are. (One layer, ``x @ W - mu @
W``, would subtract two large float32 numbers where whitening stretches a direction of small
variance: centring first keeps the float32 result within rounding of the run's float64 one.)

What no module list reproduces is refused (one line, exit 2): poolers that read inner layers
(``avg_first_last``, ``avg_top2``), a flow (``post_whiten`` flow, flow_glow), a whitening the
checkpoint does not hold (saved before the harness kept it), and a method's own sentence head
(IS-BERT's CNN).

The model card (``README.md``) names the base model, the method and its citation, the training
settings and the record's scores (best STS-B dev, final STS and transfer tasks); ``harness_run.json``
keeps the record's config, scores and provenance beside it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.atomic import write_text
from harness.config.models import KNOWN_LICENSES
from harness.errors import ConfigError

ST_POOLING = {"cls_before_pooler": "cls", "cls": "cls", "avg": "mean"}
"""The harness poolers sentence-transformers' Pooling computes, by its mode name."""

HUB_NAMES = {"minilm": "sentence-transformers/all-MiniLM-L6-v2"}
"""Hub names of the harness's model shorthands (the base model a card names)."""

RUN_KEYS = ("run_id", "config", "best_step", "best_stsb_dev", "final", "provenance")
"""What ``harness_run.json`` keeps of the record."""


def check_exportable(record: Mapping[str, Any], whitening: tuple[str, Any, Any] | None) -> str:
    """The run's evaluation pooler, after refusing what sentence-transformers cannot reproduce."""
    config = record.get("config") or {}
    pooler = str(config.get("eval_pooler", "cls_before_pooler"))
    if pooler not in ST_POOLING:
        raise ConfigError(
            f"pooler {pooler!r} reads inner layers, which sentence-transformers cannot pool; load the "
            "checkpoint with transformers instead (RUNS/checkpoints/<run_id>)"
        )
    kind = str(config.get("post_whiten", "none"))
    if kind.startswith("flow"):
        raise ConfigError(
            f"run {record.get('run_id')} scored its embeddings after post_whiten={kind}, a normalising flow "
            "that no sentence-transformers layer computes: nothing exported (the encoder alone would not "
            "give its scores)"
        )
    if kind != "none" and (whitening is None or whitening[0] != kind):
        raise ConfigError(
            f"run {record.get('run_id')} scored its embeddings after post_whiten={kind}, but its checkpoint "
            "holds no fitted whitening (saved by an older harness): train it again with --save-model"
        )
    return pooler


def write_st_model(checkpoint: Path, out: Path, pooler: str, whitening: tuple[str, Any, Any] | None) -> None:
    """Write ``checkpoint`` (a ``save_pretrained`` folder) as a sentence-transformers folder ``out``."""
    try:
        from sentence_transformers import SentenceTransformer

        try:  # sentence-transformers >= 6 moved its modules
            from sentence_transformers.base.modules import Dense, Transformer
            from sentence_transformers.sentence_transformer.modules import Pooling
        except ImportError:
            from sentence_transformers.models import Dense, Pooling, Transformer  # type: ignore[no-redef]
    except ImportError as exc:
        raise ConfigError(
            f"harness export needs sentence-transformers (pip install -e '.[bench]'): {exc}"
        ) from None
    import torch

    word = Transformer(str(checkpoint))
    dim_fn = getattr(word, "get_embedding_dimension", None) or word.get_word_embedding_dimension
    dim = int(dim_fn())
    modules: list[Any] = [word, Pooling(dim, pooling_mode=ST_POOLING[pooler])]
    if pooler == "cls":  # the trained head, copied into the pooler by the run
        dense = Dense(dim, dim, bias=True, activation_function=torch.nn.Tanh())
        head = word.auto_model.pooler.dense
        with torch.no_grad():
            dense.linear.weight.copy_(head.weight)
            dense.linear.bias.copy_(head.bias)
        modules.append(dense)
    if whitening is not None:  # (x - mu) @ W as two linear layers: centre, then whiten
        _kind, mu, w = whitening
        centre = Dense(dim, dim, bias=True, activation_function=torch.nn.Identity())
        whiten = Dense(dim, int(w.shape[1]), bias=False, activation_function=torch.nn.Identity())
        with torch.no_grad():
            centre.linear.weight.copy_(torch.eye(dim))
            centre.linear.bias.copy_(torch.from_numpy(-mu.reshape(-1)))
            whiten.linear.weight.copy_(torch.from_numpy(w.T.copy()))
        modules += [centre, whiten]
    SentenceTransformer(modules=modules, device="cpu").save(str(out))
    classic_layout(out, int(word.max_seq_length))


POOLING_FLAGS = {
    "cls": "cls_token",
    "mean": "mean_tokens",
    "max": "max_tokens",
    "mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "weightedmean": "weightedmean_tokens",
    "lasttoken": "lasttoken",
}
"""sentence-transformers 6's pooling mode -> the flag of the classic ``1_Pooling/config.json``."""


def classic_layout(out: Path, max_seq_length: int) -> None:
    """Rewrite a saved sentence-transformers folder in the layout that versions 3.x to 6.x all load:
    module types under ``sentence_transformers.models`` (6 moved them; it still loads the old names,
    as every older model on the hub uses them), the Transformer's ``max_seq_length``, the Pooling
    flags of before 6, and no keys a Dense of before 6 refuses. The modules' weights are untouched."""
    modules = json.loads((out / "modules.json").read_text(encoding="utf-8"))
    for module in modules:
        kind = str(module["type"]).rsplit(".", 1)[-1]
        module["type"] = f"sentence_transformers.models.{kind}"
        folder = out / str(module.get("path") or "")
        if kind == "Transformer":
            config = {"max_seq_length": max_seq_length, "do_lower_case": False}
            write_text(folder / "sentence_bert_config.json", json.dumps(config, indent=2) + "\n")
        elif kind in ("Pooling", "Dense"):
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            if kind == "Pooling" and "pooling_mode" in config:
                mode = str(config.pop("pooling_mode"))
                dim = config.pop("embedding_dimension", config.get("word_embedding_dimension"))
                config = {
                    "word_embedding_dimension": dim,
                    **{f"pooling_mode_{f}": f == POOLING_FLAGS[mode] for f in POOLING_FLAGS.values()},
                    "include_prompt": config.get("include_prompt", True),
                }
            for key in ("module_input_name", "module_output_name"):
                config.pop(key, None)
            write_text(folder / "config.json", json.dumps(config, indent=4) + "\n")
    write_text(out / "modules.json", json.dumps(modules, indent=2) + "\n")


def base_license(model: str) -> str | None:
    """The license of a run's base encoder: the known hub encoders' (:data:`KNOWN_LICENSES`), else a
    local folder's model card's ``license:`` line; None for random weights or where none is stated."""
    base = base_model(model)
    if base is None:
        return None
    if base in KNOWN_LICENSES:
        return KNOWN_LICENSES[base]
    card = Path(base) / "README.md"
    try:
        head = card.read_text(encoding="utf-8").split("---")[1] if card.is_file() else ""
    except (OSError, UnicodeDecodeError, IndexError):
        return None
    for line in head.splitlines():
        if line.startswith("license:") and line.partition(":")[2].strip():
            return line.partition(":")[2].strip()
    return None


def base_model(model: str) -> str | None:
    """The hub name of a run's encoder, None for a random one (a local path stays as given)."""
    if model.startswith("random:"):
        return None
    return HUB_NAMES.get(model, model)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(value.items())) or "defaults"
    if isinstance(value, list | tuple):
        return ",".join(_fmt(v) for v in value)
    return str(value)


def _score_rows(final: Mapping[str, Any]) -> list[str]:
    rows = []
    for group, what in (("sts", "Spearman x 100"), ("transfer", "accuracy, %")):
        scores = final.get(group)
        if isinstance(scores, Mapping) and scores:
            for task, value in scores.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    rows.append(f"| {group} | {task} | {value:.2f} | {what} |")
    return rows


def model_card(record: Mapping[str, Any], citation: str, pooler: str, whitening: str | None) -> str:
    """The exported folder's ``README.md``: base model, method, training settings, the record's scores."""
    config = record.get("config") or {}
    base = base_model(str(config.get("model", "")))
    method = str(config.get("method", "?"))
    steps = config.get("max_steps")
    front = _front_matter(base, method, base_license(str(config.get("model", ""))))
    embedding = _embedding_text(config, pooler, whitening)
    settings = _settings(config)
    best, step = record.get("best_stsb_dev"), record.get("best_step")
    lines = [
        *front,
        "",
        f"# {method} on {base or config.get('model')} ({record.get('run_id')})",
        "",
        f"A sentence encoder trained by cse-harness, run `{record.get('run_id')}`: "
        f"{method} ({citation}), starting from {base or config.get('model')}.",
        "",
        f"- **Base model:** {base or str(config.get('model')) + ' (random weights)'}",
        f"- **Sentence embedding:** {embedding}; cosine similarity",
        f"- **Selected checkpoint:** step {step} of {_fmt(steps) if steps else 'one epoch'}, by STS-B dev",
        "",
        "## Training settings",
        "",
        *(f"- {name}: {_fmt(value)}" for name, value in settings),
        "",
        "## Scores (the run record's)",
        "",
        "| group | task | score | unit |",
        "|---|---|---|---|",
    ]
    if isinstance(best, int | float):
        lines.append(f"| dev | STS-B dev (best checkpoint) | {best:.2f} | Spearman x 100 |")
    lines += _score_rows(record.get("final") or {})
    lines += [
        "",
        "STS: SentEval's protocol (STS12-16 'all' setting, STS-B and SICK-R test); transfer: SentEval's "
        f"{config.get('transfer_mode', 'fasttest')} logistic regression. Embeddings of this folder give "
        "these numbers under `harness eval --model <this folder>`.",
        "",
        "## Usage",
        "",
        "```python",
        "from sentence_transformers import SentenceTransformer",
        "",
        'model = SentenceTransformer("path/to/this/folder")',
        'embeddings = model.encode(["A man is playing a guitar.", "Someone plays an instrument."])',
        "```",
        "",
    ]
    return "\n".join(lines)


def _front_matter(base: str | None, method: str, license: str | None) -> list[str]:
    """The card's YAML header, as the hub reads it (the base encoder's license carried over)."""
    front = ["---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity"]
    if license:
        front.append(f"license: {license}")
    if base:
        front.append(f"base_model: {base}")
    tags = ["sentence-transformers", "sentence-similarity", "cse-harness", method]
    return [*front, "tags:", *(f"- {tag}" for tag in tags), "---"]


def _embedding_text(config: Mapping[str, Any], pooler: str, whitening: str | None) -> str:
    """How the folder embeds a sentence, in words."""
    embedding = f"{ST_POOLING[pooler]} pooling" + (
        " and the trained head (Dense, Tanh)" if pooler == "cls" else ""
    )
    if whitening:
        embedding += (
            f", then {whitening} whitening fitted on {config.get('post_whiten_sentences')} corpus sentences "
            "(two Dense layers without activation: centring, then the whitening matrix)"
        )
    return embedding


def _settings(config: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The training settings the card lists."""
    corpus_id = str(config.get("corpus_id", ""))
    corpus, _, digest = corpus_id.partition(":")
    steps = config.get("max_steps")
    return [
        ("profile", config.get("profile")),
        ("corpus", f"{corpus or '?'} (content hash {digest or '?'})"),
        ("batch size", config.get("batch_size")),
        ("max length", config.get("max_length")),
        ("steps", "one epoch" if steps is None else steps),
        ("learning rate", config.get("lr")),
        ("warm-up steps", config.get("warmup_steps")),
        ("seed", config.get("seed")),
        ("precision", config.get("precision")),
        ("method parameters", config.get("params") or {}),
        ("training pooler", config.get("train_pooler")),
    ]


def run_summary(record: Mapping[str, Any]) -> dict[str, Any]:
    """What ``harness_run.json`` keeps: the record's config (no host paths), scores and provenance."""
    about = {k: record.get(k) for k in RUN_KEYS}
    config = dict(about.get("config") or {})
    config.pop("corpus", None)  # a path on the machine that trained it; corpus_id names the content
    about["config"] = config
    return about


__all__ = ["base_model", "check_exportable", "model_card", "run_summary", "write_st_model"]
