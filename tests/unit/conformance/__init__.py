"""The store's conformance suite: each concern's rules, through the interface, on both engines."""
