"""Reads of the judges app."""
