"""spmdcheck rules for vLLM (inference: no backward, so only forward types matter)."""
