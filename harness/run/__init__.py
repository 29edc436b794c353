"""One training run: data, the optimiser step, evaluation hooks, checkpoints and the run itself."""
