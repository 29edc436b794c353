"""A grid's progress: its lines and report, and live tracking with the ecosystem's tools (no Ray here)."""
