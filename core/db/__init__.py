"""Database tools that know no domain: the PostgreSQL backend and prepared statements."""
