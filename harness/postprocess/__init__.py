"""Post-processing of a trained encoder's embeddings: BERT-flow and BERT-whitening (not training methods)."""
