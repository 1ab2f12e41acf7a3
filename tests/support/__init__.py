"""Helpers the tiers share that are not tests: servers they start, store operations, figures."""
