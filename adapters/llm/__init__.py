"""LLM adapters: any OpenAI-compatible chat endpoint."""

from adapters.llm.openai_compat import OpenAICompatibleLLM
from adapters.llm.response_cache import ResponseCache

__all__ = ["OpenAICompatibleLLM", "ResponseCache"]
