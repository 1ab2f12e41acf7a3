"""Real-process tests (tier 2): worker processes, signals, kill -9, real servers restarted."""
