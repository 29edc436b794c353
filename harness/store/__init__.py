"""The run store: run records, their schema and provenance, and atomic writes."""
