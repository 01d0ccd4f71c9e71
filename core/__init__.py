"""Tacit's domain: gate, indexing, retrieval, answering and the ports they need.

Nothing here imports an adapter, the composition root, or a service client library
(import-linter enforces it).
"""
