"""Django's PostgreSQL backend with a cheaper health check (config/postgresql/base.py)."""
