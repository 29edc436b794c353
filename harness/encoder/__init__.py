"""The encoder: loading, the wrapper with its poolers, the training call and its CPU kernels."""
