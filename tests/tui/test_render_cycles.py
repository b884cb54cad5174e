"""Textual's rendering leaves no cyclic garbage of its strips or layout closures
(console/tui/render_cycles.py): cyclic garbage is freed only by the console's periodic full
sweep, which walks every tracked object (docs/performance.md, "Textual's render garbage")."""

import gc
from collections import Counter

from rich.segment import Segment
from rich.style import Style
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.strip import Strip
from textual.widgets import Static

from fleetdeck.console.tui import render_cycles


class Panels(App[None]):
    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static("left", id="left")
            yield Static("right", id="right")


def test_every_patch_applies_to_the_pinned_textual() -> None:
    """A Textual upgrade that moves these internals fails here: look again, do not lose it."""
    assert render_cycles.install() == ["Strip", "Compositor._arrange_root"]


def test_the_patched_strip_methods_answer_as_textuals_do() -> None:
    assert render_cycles.install()
    strip = Strip([Segment("abc", Style(bold=True)), Segment("de")])
    assert strip.crop_extend(0, 5, None) is strip
    assert strip.crop_extend(1, 7, None).text == "bcde  "
    assert strip.crop_extend(2, 4, None).text == "cd"
    assert list(strip.divide([5])) == [strip]
    assert list(strip.divide(iter([5, 9]))) == [strip]
    assert [s.text for s in strip.divide([2, 5])] == ["ab", "cde"]
    # What a call stored in the strip's own caches: nothing that refers back to it.
    for cache in (strip._crop_extend_cache, strip._divide_cache):
        assert all(value is not strip and value != [strip] for value in cache._cache.values())


async def test_layouts_and_paints_leave_no_strip_or_closure_cycles() -> None:
    assert render_cycles.install()
    app = Panels()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        gc.unfreeze()  # another test's tune_gc would hide what this one makes
        gc.collect()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for i in range(6):
                app.query_one("#left", Static).update(f"left {i}\n" * (i + 1))
                await pilot.resize_terminal(80 + i, 24)
                await pilot.pause()
            gc.collect()
            strips = sum(1 for o in gc.garbage if isinstance(o, Strip))
            closures = Counter(o.__qualname__ for o in gc.garbage
                               if type(o).__name__ == "function")
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
    assert strips == 0
    assert not [name for name in closures if "add_widget" in name], closures
