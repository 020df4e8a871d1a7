"""A model: its config (architecture), weight bytes, checkpoints and drafters."""
