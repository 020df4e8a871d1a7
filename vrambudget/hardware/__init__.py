"""GPU facts: the catalog (memory, SMs, architecture) and per-card start-up facts."""
