"""Small text helpers shared by the screens."""


def esc(text: str) -> str:
    """Make untrusted text safe inside Textual markup (node ids, reasons, broker errors …)."""
    return text.replace("\\", "\\\\").replace("[", "\\[")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
