"""Reasoning over retrieved knowledge: the logic form (plan + executor), the pre/post-check
verifier, KGiRAG's judge and feedback policy, and follow-up rewriting."""
