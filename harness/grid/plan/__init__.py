"""A grid's plan against its store and what it costs: run status, seconds and hours per run, memory,
the estimate's calibration."""
