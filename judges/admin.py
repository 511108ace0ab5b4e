"""Django admin for the judges app."""
