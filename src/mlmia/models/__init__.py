"""Masked language models: loading any checkpoint, the shared tokenizer, training from scratch."""
