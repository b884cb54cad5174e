"""Command palette entries named ``category: action`` (``node: drain gpu0012``, ``job: restart
41``, ``view: nodes``). In read-only mode the mutating entries do not exist."""

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from fleetdeck.console.commands import job_refusal

if TYPE_CHECKING:
    from fleetdeck.console.tui.app import FleetdeckApp

MAX_NODE_HITS = 200


class FleetCommands(Provider):
    @property
    def fleet(self) -> "FleetdeckApp":
        return cast("FleetdeckApp", self.app)

    def _static(self) -> list[tuple[str, Callable[[], object], str]]:
        app = self.fleet
        out: list[tuple[str, Callable[[], object], str]] = [
            (f"view: {v}", partial(app.action_view, v), f"switch to the {v} view ({i + 1})")
            for i, v in enumerate(("overview", "nodes", "jobs", "fabric", "events", "incidents"))
        ]
        out.append(("help: keys", app.action_help, "every key binding (?)"))
        return out

    def _dynamic(self, query: str) -> list[tuple[str, Callable[[], object], str]]:
        app = self.fleet
        words = [w for w in query.lower().replace(":", " ").split()
                 if w not in ("node", "job", "drain", "resume", "restart", "open", "view")]
        out: list[tuple[str, Callable[[], object], str]] = []
        nodes = sorted(app.state.nodes)
        if words:
            nodes = [n for n in nodes if any(w in n.lower() for w in words)]
        for n in nodes[:MAX_NODE_HITS]:
            out.append((f"node: open {n}", partial(app.open_node, n), "node detail"))
            if not app.read_only:
                out.append((f"node: drain {n}", partial(app.request_drain, [n]),
                            "drain (asks for a reason, shows the blast radius)"))
                out.append((f"node: resume {n}", partial(app.request_resume, [n]),
                            "return to service"))
        jobs = sorted(app.state.jobs)
        if words:
            jobs = [j for j in jobs if any(w in j.lower() for w in words)] or (
                jobs if "job" in query.lower() else [])
        if not app.read_only:
            # Only the jobs a restart is for: pending, completed and cancelled ones were
            # offered, then refused (a newcomer's run).
            jobs = [j for j in jobs if not job_refusal(app.state, j)]
            for j in jobs[:MAX_NODE_HITS]:
                out.append((f"job: restart {j}", partial(app.request_restart, j),
                            "requeue from the last checkpoint"))
        return out

    async def discover(self) -> Hits:
        for text, command, help_text in self._static():
            yield DiscoveryHit(text, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, command, help_text in self._static() + self._dynamic(query):
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), command, text=text, help=help_text)
