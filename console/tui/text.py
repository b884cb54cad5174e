"""Small text helpers shared by the screens."""


def esc(text: str) -> str:
    """Make untrusted text safe inside Textual markup (node ids, reasons, broker errors …)."""
    return text.replace("\\", "\\\\").replace("[", "\\[")


def plural(n: int, word: str, words: str = "") -> str:
    """``1 node``, ``2 nodes``; irregular plurals given: ``plural(n, "leaf", "leaves")``."""
    return f"{n} {word if n == 1 else (words or word + 's')}"
