"""The profiles: what a run costs (encoder, corpus, batch, length, budget, evaluation)."""

from __future__ import annotations

from typing import Any

# -- profiles -------------------------------------------------------------------------------------
_MINILM_NLI: dict[str, Any] = {
    "model": "minilm",
    "corpus": "corpus/nli-sentences.txt",
    "batch_size": 64,
    "max_length": 32,
    "lr": 3e-5,
    "threads": 1,
    "length_buckets": 4,
    "precision": "auto",
    "final_tasks": "sts",
    "transfer_mode": "fasttest",
}


PROFILES: dict[str, dict[str, Any]] = {
    "cpu": {**_MINILM_NLI, "max_steps": 100, "eval_every": 25},
    "demo": {**_MINILM_NLI, "max_steps": 40, "eval_every": 20, "eval_precision": "auto"},
    "night": {**_MINILM_NLI, "max_steps": 100, "eval_every": 25, "eval_precision": "auto"},
    "paper": {
        "model": "bert-base-uncased",
        "corpus": "corpus/wiki1m_for_simcse.txt",
        "batch_size": 64,
        "max_length": 32,
        "max_steps": None,
        "eval_every": 125,
        "lr": 3e-5,
        "precision": "tf32",
        "final_tasks": "all",
        "transfer_mode": "test",
    },
    "smoke": {
        "model": "random:tiny",
        "corpus": "corpus/nli-sentences.txt",
        "batch_size": 8,
        "max_length": 32,
        "max_steps": 4,
        "eval_every": 2,
        "lr": 3e-5,
        "threads": 1,
        "final_tasks": "sts",
        "transfer_mode": "fasttest",
    },
}
"""What a run costs.

``cpu`` (the default): the packaged all-MiniLM-L6-v2, a SENTENCE-TRAINED encoder (the analog of
SimCSE++'s SBERT starts, not of BERT-base), on the 25k-sentence NLI corpus; batch 64, 100 steps with
an STS-B dev evaluation every 25 (model selection over steps 25-100), single-threaded, training calls
encoded in 4 length buckets, bf16 training and dev evaluations where the CPU has native bf16 (else fp32;
the precision is in the run id); then the seven STS tasks. The budget comes from a measured STS-B dev
curve of SimCSE on this encoder (docs/guide.md, "Where the `cpu` budget comes from": it rises by
step 80 and drifts after). ``night``: ``cpu`` with the final tasks in bf16 too where the CPU has
native bf16 (STS within 0.02 of fp32 per task: docs/correctness.md, "Reproducibility"), which
brings the 5-seed replication grid of every claim under one night on 2 cores (``harness grid all
--profile night --seeds 5 --dry-run`` prints the estimate); without native bf16 its runs are the
``cpu`` profile's, ids included. ``demo``: ``cpu`` with 40 steps (dev evaluation every 20), what
``make run`` uses so that 3 methods x 3 seeds fit half an hour on 2 cores. ``paper``: the papers'
setting (bert-base, 1M Wikipedia sentences, one epoch), training in ``tf32`` (on a GPU, matrix
products take TF32 inputs, no coarser than the fp16 autocast the papers' own scripts trained in;
docs/correctness.md, "Arithmetic"); SentEval's fp32 for the final tasks. ``smoke``: a tiny random
BERT and four steps, for tests and CI only, never a result."""
