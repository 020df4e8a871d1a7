"""Vision towers as vLLM builds and profiles them, one file per kind (base.py says what each answers)."""
