"""The ground floor every app stands on: tools that know no domain (database, sessions, log-in,
request guards, CSV safety, the broker). core imports no app and no part of config
(tests/test_app_boundaries.py)."""
