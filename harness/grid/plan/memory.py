"""A run's host memory: measured (the peak resident set of each run, in its record) and estimated
(what a grid trial asks Ray for, so that Ray never starts more trials than the node's memory holds).

Why the grid needs both: the ``-noise`` probes of SimCSE++ Table 1 encode every sentence ``2K = 20``
times with gradients, which at batch 64 and length 32 keeps ~5 GB of activations on the packaged
MiniLM; and a Ray worker that is reused for the next trial runs it in a new thread, whose allocator
arena does not reuse the memory the last trial freed in its own: in the replication night two
reused workers held over 20 GB together when their third K = 10 trial started, and Ray's memory
monitor killed one (docs/replication.md, "How it ran"). :func:`release_freed` after every trial returns
that memory to the system; :func:`estimate_bytes` lets Ray's scheduler keep the sum of the running
trials' needs within its ``memory`` resource.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.grid.plan.unit_costs import encoder_class
from harness.run.footprint import footprint

if TYPE_CHECKING:
    from harness.store.run_config import RunConfig


GB = 1024**3


# Calibrated on the packaged MiniLM (d = 384, 6 layers): the extra peak memory of the K = 10 noise
# probe's 18 extra encoder rows over SimCSE in `harness train --profile night --final-tasks none`,
# per row-token, rounded up (120 KB); the base (model, optimiser, data, evaluation: 2 GB) from the
# records' ``peak_rss_mb`` of whole runs. The estimate adds 15 % for the allocator. The measurements
# and their date: docs/speed.md, "Where the code's constants come from". The larger encoders are not
# measured: they scale per token by layers x width (bert-base 12 x 768, bert-large 24 x 1024 against
# 6 x 384) and carry their weights and AdamW's two moments in the base; ``random:tiny`` (2 x 64) is
# the tests'.
_BASE_BYTES = {"tiny": 0.5 * GB, "minilm": 2.0 * GB, "bert-base": 3.5 * GB, "bert-large": 7.5 * GB}


_ROW_TOKEN_BYTES = {
    "tiny": 10 * 1024,
    "minilm": 120 * 1024,
    "bert-base": 4 * 120 * 1024,
    "bert-large": 11 * 120 * 1024,
}


_WEIGHT_BYTES = {
    "tiny": 2_057_536 * 4,
    "minilm": 22_713_216 * 4,
    "bert-base": 109_482_240 * 4,
    "bert-large": 335_141_888 * 4,
}
"""fp32 weights of one encoder (parameter counts of ``random:tiny``, ``random:minilm``,
``random:bert-base`` and bert-large-uncased): what a method's extra encoder copy holds (a trained
copy 4x: weights, gradients and AdamW's two moments; a frozen one 1x)."""


TRAINED_COPY_SHARE = 4


_MARGIN = 1.15


NO_GRAD_ROW_MEMORY = 0.25
"""The activation memory of an encoder row without gradient (a forward only, e.g. a momentum key
encoder's pass) as a share of a row with gradient: nothing is kept for a backward, so at its peak
the pass holds the working set of the layer it computes (attention scores included) rather than
every layer's: about a sixth on MiniLM's six layers, a quarter to stay an upper estimate."""


def estimate_bytes(config: RunConfig, device: str = "cpu") -> int:
    """Host memory one run needs at its peak, in bytes (an upper estimate, for scheduling).

    On a CPU the activations of ``rows x batch x max_length`` tokens dominate (``rows``: the
    method's encoder rows with gradient, plus :data:`NO_GRAD_ROW_MEMORY` of each row without), a
    method's extra encoder copies add their weights (a trained copy :data:`TRAINED_COPY_SHARE`
    times), and so do the trainable parameters the method builds itself (MLP heads, SCD's 4096-wide
    projector, MoCoSE's predictor): all measured (:func:`harness.run.footprint.footprint`). On a GPU
    these live in GPU memory and the host keeps the model, the data and the evaluation (the base).
    """
    kind = encoder_class(config.model)
    base = _BASE_BYTES.get(kind, _BASE_BYTES["bert-base"])
    if device != "cpu":
        return int(base)
    measured = footprint(config.method, config.params, config.hidden_size)
    rows = measured.rows + NO_GRAD_ROW_MEMORY * measured.no_grad_rows
    tokens = rows * config.batch_size * config.max_length
    per_token = _ROW_TOKEN_BYTES.get(kind, _ROW_TOKEN_BYTES["bert-base"])
    weights = _WEIGHT_BYTES.get(kind, _WEIGHT_BYTES["bert-base"])
    copies = (TRAINED_COPY_SHARE * measured.trained_copies + measured.frozen_copies) * weights
    heads = TRAINED_COPY_SHARE * 4 * measured.own_parameters
    return int(_MARGIN * (base + tokens * per_token + copies + heads))
