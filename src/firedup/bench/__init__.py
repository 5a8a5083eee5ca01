"""Measure a ready server through its OpenAI-compatible API."""
