"""The node side: one headless agent per GPU node, and a simulator of many.

Must never import textual or rich (tests/test_import_hygiene.py): an agent starts on every node of
a 4,000-node cluster and should be small and quick.
"""
