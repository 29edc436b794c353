"""Evaluation: STS, SentEval transfer tasks and embedding geometry."""
