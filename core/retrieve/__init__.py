"""Retrieval: from a question to the evidence an answer may use."""
