"""makad: a local daemon that owns an AI agent's durable, white-box memory."""

__version__ = "0.1.0"
