"""Keep Textual's rendering from making reference cycles, so its garbage is freed at once.

The console collects its young objects often and its whole state only at the periodic sweep
(``fleetdeck.runtime.sweep``): its fleet state is acyclic and freed by reference counting.
Cyclic garbage that outlived two young collections waits for that sweep, one pass over the
state. A live TUI made 120,000-140,000 such objects every 30 s, nearly
all from two places in Textual 8.2.8 (``gc.DEBUG_SAVEALL`` census; docs/performance.md,
"Textual's render garbage"):

- ``Strip`` caches its own result: ``crop_extend`` of its whole length stores the strip in its
  own ``_crop_extend_cache``, and ``divide`` at its own length stores ``[self]``. Each such
  strip, with its seven ``FIFOCache``s and segments, is a cycle. The wrappers below answer
  those calls without storing (the answer is the same object the cache would have held).
- ``Compositor._arrange_root`` places widgets with a recursive closure, which refers to itself
  through its cell; it keeps each layout's map, and with it widgets removed since, alive. The
  method is recompiled from its own source with that cell cleared before it returns.

``install()`` checks each target is what it was written against and leaves it alone if not
(tests/tui/test_render_cycles.py fails then, so a Textual upgrade is looked at, not missed).
"""

import __future__

import inspect
import logging
import textwrap
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from textual import _compositor
from textual.strip import Strip

log = logging.getLogger("fleetdeck.console.tui")

_ARRANGE_END = "    widgets -= invisible_widgets\n    return map, widgets\n"
_ARRANGE_END_PATCHED = ("    widgets -= invisible_widgets\n"
                        "    add_widget = None  # fleetdeck: the closure referred to itself\n"
                        "    return map, widgets\n")

_installed: list[str] = []


def install() -> list[str]:
    """Patch what can be patched (once); return the names of the patches in effect."""
    if _installed:
        return list(_installed)
    for name, patch in (("Strip", _patch_strip), ("Compositor._arrange_root", _patch_arrange)):
        try:
            done = patch()
        except Exception:  # a Textual whose internals moved: keep its own behaviour
            log.debug("render cycle patch %s not applied", name, exc_info=True)
            done = False
        if done:
            _installed.append(name)
    return list(_installed)


def _patch_strip() -> bool:
    if not all(hasattr(Strip, a) for a in ("crop_extend", "divide", "_crop_extend_cache",
                                          "_divide_cache")):
        return False
    crop_extend: Callable[..., Strip] = Strip.crop_extend
    divide: Callable[..., Sequence[Strip]] = Strip.divide

    def crop_extend_(self: Strip, start: int, end: int, style: Any) -> Strip:
        # extend_cell_length(end) is self, and so is crop(0, end) of it.
        if start <= 0 and end == self.cell_length:
            return self
        return crop_extend(self, start, end, style)

    def divide_(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
        cuts = list(cuts)
        length = self.cell_length
        if [cut for cut in cuts if cut <= length] == [length]:
            return [self]
        return divide(self, cuts)

    for new, old in ((crop_extend_, crop_extend), (divide_, divide)):
        new.__name__, new.__qualname__, new.__doc__ = old.__name__, old.__qualname__, old.__doc__
    Strip.crop_extend = crop_extend_  # type: ignore[method-assign]
    Strip.divide = divide_  # type: ignore[method-assign]
    return True


def _patch_arrange() -> bool:
    method = _compositor.Compositor._arrange_root
    source = textwrap.dedent(inspect.getsource(method))
    if source.count(_ARRANGE_END) != 1 or "def add_widget(" not in source:
        return False
    # Padded to the method's own first line, so a traceback through it names the right lines
    # of _compositor.py (one more after the inserted line).
    _, first = inspect.getsourcelines(method)
    code = compile("\n" * (first - 1) + source.replace(_ARRANGE_END, _ARRANGE_END_PATCHED),
                   inspect.getsourcefile(method) or "<textual._compositor>", "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)
    namespace: dict[str, Any] = {}
    exec(code, vars(_compositor), namespace)
    patched = namespace["_arrange_root"]
    patched.__qualname__ = method.__qualname__
    _compositor.Compositor._arrange_root = patched  # type: ignore[method-assign]
    return True
