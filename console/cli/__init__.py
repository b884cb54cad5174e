"""Headless front ends of the console for scripts and terminals: status, drain/resume/restart-job,
record/replay glue, events/history queries. They drive the same ``ConsoleSession`` as the TUI and
may print with rich; nothing below them imports this package (pyproject import-linter contracts)."""
