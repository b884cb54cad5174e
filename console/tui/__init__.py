"""The Textual TUI. The only package that imports textual; it renders state and sends intents."""
