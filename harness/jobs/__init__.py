"""The jobs of ``harness eval`` and ``harness export`` (an encoder scored, a run's encoder exported): the
engine parts of those commands, apart from a training run."""
