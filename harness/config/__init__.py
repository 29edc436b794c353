"""Configuration: profiles, run settings, run configs and their ids, the values a user types, where
models and data are."""
