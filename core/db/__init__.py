"""Database tools that know no domain: the PostgreSQL backend, prepared statements, and the seams
where a service steps past the ORM (rows.py)."""
