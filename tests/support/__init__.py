"""Test support: stand-ins for external services and shared fixtures."""
