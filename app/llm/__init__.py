"""Generation: the generation panel's controller, Hugging Face and GGUF import."""
