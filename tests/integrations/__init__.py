"""End-to-end tests of the framework adapters, each against the real package."""
