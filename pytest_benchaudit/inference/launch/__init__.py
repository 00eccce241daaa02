"""Servers a run starts for itself: the embedded llama.cpp model and vLLM."""
