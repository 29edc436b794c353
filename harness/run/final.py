"""The end of a run: the best state loaded, the best encoder saved, the final tasks scored, scores
that are not numbers refused."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from harness.atomic import atomic_folder
from harness.config.hardware import torch_threads
from harness.encoder.model import SentenceEncoder
from harness.encoder.saved import save_post_whitening, save_sentence_head
from harness.errors import TrainingError
from harness.run.evaluation_point import RunCalls, RunTimes
from harness.run.hooks import (
    FINAL_SECONDS,
    EmbedFn,
    FinalEvaluator,
    Whitening,
    fit_post_processing,
    non_finite_scores,
)
from harness.store.record import RunRecord
from harness.store.run_config import RunConfig
from harness.store.run_store import SAVED_ENCODER, RunStore

if TYPE_CHECKING:
    from methods.base import Method

ThreadsHook = Callable[[], int]
"""``final_threads()``: how many threads the final evaluation may use now (a grid's trial asks its
node's :class:`~harness.grid.slots.SlotBoard`: more than the run's own once cores fall idle)."""


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
    with atomic_folder(target, replace=SAVED_ENCODER) as building:
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


class FinalStage:
    """The end of :class:`~harness.run.training.TrainingRun`: the best state loaded, its head in the
    pooler, the optional ``save_pretrained``, post-whitening and the final tasks (on more threads
    where the grid hands the run idle cores). The run builds it once its encoder and method exist."""

    def __init__(
        self,
        *,
        config: RunConfig,
        data_root: Path,
        record: RunRecord,
        encoder: SentenceEncoder,
        method: Method,
        sentences: list[str],
        calls: RunCalls,
        best: dict[str, Any],
        times: RunTimes,
        final_evaluate: FinalEvaluator | None,
        model_store: RunStore | None = None,
        final_threads: ThreadsHook | None = None,
    ) -> None:
        self.config = config
        self.data_root = data_root
        self.record = record
        self.run_id = record["run_id"]
        self.encoder = encoder
        self.method = method
        self.sentences = sentences
        self.calls = calls
        self.best = best
        self.times = times
        self.final_evaluate = final_evaluate
        self.model_store = model_store
        self.final_threads = final_threads

    def final_evaluation(self) -> None:
        """The best state, its head in the pooler, the optional saved model, then the final tasks."""
        self._load_best()
        t0 = time.perf_counter()
        embed, whitening = self._post_whitened(self.calls.embed)
        fitted = time.perf_counter() - t0
        if self.model_store is not None:  # after the fit: the saved folder carries the whitening
            self._save_model(self.model_store, whitening)
        t1 = time.perf_counter()
        if self.final_evaluate is not None:
            with torch_threads(self._more_threads()):
                self._final_tasks(self.final_evaluate, embed)
        spent = fitted + time.perf_counter() - t1
        self.record["final_time_s"] = round(spent, 3)
        self.times.eval_s += spent
        self.record["train_time_s"] = round(self.times.train_s, 3)
        self.record["eval_time_s"] = round(self.times.eval_s, 3)

    def _more_threads(self) -> int | None:
        """The final tasks' threads where the grid hands this run more than its own (else None)."""
        if self.final_threads is None or self.encoder.device.type != "cpu":
            return None
        own = torch.get_num_threads()
        more = self.final_threads()
        if more <= own:
            return None
        self.record["final_threads"] = more
        self.calls.say(
            f"[{self.run_id}] final evaluation on {more} threads (cores left idle by finished runs)"
        )
        return more

    def _load_best(self) -> None:
        if self.best["encoder"] is not None:
            self.encoder.load_state_dict(self.best["encoder"])
            self.method.restore_state(self.best["method"])
        self.encoder.eval()
        self.calls.head_into_pooler()

    def _save_model(self, store: RunStore, whitening: Whitening | None) -> None:
        target = store.checkpoint_dir(self.run_id)
        save_encoder(target, self.encoder, self.config.method, self.method.sentence_head(), whitening)
        self.record["checkpoint"] = store.checkpoint_ref(self.run_id)
        self.calls.say(f"[{self.run_id}] best encoder (step {self.record['best_step']}) saved to {target}")

    def _post_whitened(self, embed: EmbedFn) -> tuple[EmbedFn, Whitening | None]:
        """The final tasks' embed, post-processed as the config asks, and BERT-whitening's fitted
        ``(kind, mu, W)`` (None without one, and for a flow, which has no such form)."""
        config = self.config
        if config.post_whiten == "none":
            return embed, None
        fit_on = self.sentences[: config.post_whiten_sentences]
        self.calls.say(
            f"[{self.run_id}] fitting {config.post_whiten} post-processing on {len(fit_on)} corpus sentences"
        )
        return fit_post_processing(embed, fit_on, config.post_whiten, seed=config.seed)

    def _final_tasks(self, evaluate: FinalEvaluator, embed: EmbedFn) -> None:
        config = self.config
        self.calls.say(
            f"[{self.run_id}] final evaluation ({config.final_tasks}, transfer {config.transfer_mode}, "
            f"{config.eval_precision})"
        )
        final, seconds = final_scores(evaluate, embed, self.data_root, config)
        self.record["final"] = final
        if seconds is not None:
            self.record["final_seconds"] = seconds
        check_final_scores(final)
