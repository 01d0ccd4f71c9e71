"""Adversarial tests: hostile requests, files and messages that must be refused or contained."""
