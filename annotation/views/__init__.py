"""HTML pages of the annotation app, one module per area."""
