"""Keras layers of the BERT encoder."""
