"""Indexing: documents → chunks → (entities, relations) → graph and vector stores."""
