"""Answering: evidence → a streamed answer with numbered citations."""
