"""queuectl: a durable job queue for shell commands, driven from the command line."""

__version__ = "0.1.0"
