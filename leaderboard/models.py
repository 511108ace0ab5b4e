"""Analysis snapshots are added by the analysis work; the app reads annotation and judges."""
