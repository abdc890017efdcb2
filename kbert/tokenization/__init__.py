"""Text to ids, in-graph, identical to Google FullTokenizer."""
