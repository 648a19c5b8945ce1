"""Generation and LLM serving: the generation panel, the LLM Serving dock, HF import."""
