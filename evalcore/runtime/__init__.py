"""The agent runtime: model clients, tools, the agent loop."""
