"""Django's PostgreSQL backend with a cheaper health check (core/db/postgresql/base.py)."""
