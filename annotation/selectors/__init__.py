"""Reads of the annotation app, one module per topic; each read is checked against the user."""
