"""The entity types the LLM extractor asks for unless the settings name others.

A module of its own, importing nothing: the settings read it, and every command reads the
settings, so the client of a running server (`tacit ask`) must not import the extractor (its
prompts, numpy) to learn them."""

DEFAULT_ENTITY_TYPES = (
    "organization",
    "person",
    "product",
    "technology",
    "concept",
    "component",
    "parameter",
    "event",
    "location",
)
