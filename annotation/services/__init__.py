"""Writes of the annotation app, one module per topic; import from the module that owns it."""
