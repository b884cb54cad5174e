"""The operator side. Domain modules here (ingest, fleet state, health, status) never import
textual; only console/tui does (tests/test_import_hygiene.py)."""
