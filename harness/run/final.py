"""The end of a run: the best encoder saved, the final tasks scored, scores that are not numbers refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from harness.atomic import atomic_folder
from harness.config.run_config import RunConfig
from harness.encoder.model import SentenceEncoder
from harness.encoder.saved import save_post_whitening, save_sentence_head
from harness.errors import TrainingError
from harness.run.hooks import FINAL_SECONDS, EmbedFn, FinalEvaluator, Whitening, non_finite_scores


def save_encoder(
    target: Path,
    encoder: SentenceEncoder,
    method: str,
    head: nn.Module | None,
    whitening: Whitening | None = None,
) -> None:
    """``save_pretrained`` of the encoder and its tokenizer into ``target`` (atomically: an earlier
    folder survives a failure), the method's sentence head beside them when it has one, and the
    post-whitening the run fitted (``(kind, mu, W)``) when it used one."""
    hf_model: Any = encoder.model
    with atomic_folder(target, replace=True) as building:
        hf_model.save_pretrained(str(building))
        encoder.tokenizer.save_pretrained(str(building))
        if head is not None:  # the run's sentence embedding is not the encoder's: say so beside it
            save_sentence_head(building, method, head)
        if whitening is not None:  # the run's embedding is whitened: export carries the transform
            save_post_whitening(building, *whitening)


def final_scores(
    evaluate: FinalEvaluator, embed: EmbedFn, data_root: Path, config: RunConfig
) -> tuple[dict[str, Any], dict[str, float] | None]:
    """The final tasks' scores and, apart, the seconds each task group took."""
    final = evaluate(embed, data_root, config.final_tasks, config.transfer_mode)
    seconds = final.pop(FINAL_SECONDS, None)
    return final, seconds if isinstance(seconds, dict) else None


def check_final_scores(final: dict[str, Any]) -> None:
    """Raise :class:`TrainingError` when a final score is not a finite number (the record keeps it,
    as null; the run is failed, not finished)."""
    bad = non_finite_scores(final)
    if bad:
        shown = ", ".join(bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        raise TrainingError(f"final scores are not finite numbers: {shown}")
