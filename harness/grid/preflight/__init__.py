"""Pre-flight: ``harness check`` and the checks it makes on this machine and on a Ray cluster's nodes."""
