"""CHLO ops have no Python classes here; see __init__.py."""
