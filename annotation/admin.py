"""Django admin for the annotation app."""
