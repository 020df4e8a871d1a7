"""What people read: tables, pictures and `vllm serve` commands."""
