"""Writes of the judges app."""
