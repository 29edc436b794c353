"""Benchmark and ablation harness for contrastive sentence embeddings."""

__version__ = "0.1.0"
