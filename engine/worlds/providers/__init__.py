"""Passband's own world providers, one module each, registered by name in engine/worlds/registry.py."""
