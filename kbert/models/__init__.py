"""Functional BERT models, each registered and serializable."""
