"""The KV cache plan: one spec per layer kind, and the planner vLLM's arithmetic follows."""
