"""The LLM judge: prompt templates, strict parsers, baselines and the OpenAI-compatible client."""
