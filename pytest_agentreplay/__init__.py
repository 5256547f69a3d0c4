"""pytest-agentreplay: replay-based regression testing of LLM agents."""
