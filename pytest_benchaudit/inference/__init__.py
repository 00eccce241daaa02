"""Upstream stage 3: model specs, the backend protocol, the OpenAI-compatible client, the generation
engine and cache; ``launch/`` starts local servers (llama.cpp, vLLM) in front of that same client."""
