"""A grid's life: plan, cost and memory, pre-flight, the lock, progress, and Ray Tune (``grid/tune``)."""
