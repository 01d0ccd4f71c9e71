"""Adapters: the outside world (LLM endpoints, embedders, stores, chat platforms) behind the
ports of core/ports.py. They convert; they hold no business rules."""
