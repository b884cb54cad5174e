"""``fleetdeck serve`` in a real headless Chromium (Debian's package): the page connects, a
console runs for the tab, the overview with the fleet's nodes reaches the browser, and a
screenshot of it is taken (kept under the test's tmp dir as serve.png)."""

import asyncio
import base64
import json
import re
import shutil
import socket
import subprocess
import time
import urllib.request

import aiohttp
import pytest

from fleetdeck.console.cli.serve import console_command
from fleetdeck.errors import UserError
from tests.conftest import run_cli, spawn, stop_process

CLUSTER = "web"
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1400,900"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"nothing listens on {port}")


class Cdp:
    """The few Chrome DevTools Protocol calls the test needs, over aiohttp's websocket."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0
        self.frames: list[bytes] = []

    async def call(self, method: str, **params: object) -> dict:
        self.next_id += 1
        want = self.next_id
        await self.ws.send_json({"id": want, "method": method, "params": params})
        while True:
            msg = await self.pump()
            if msg.get("id") == want:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    async def pump(self) -> dict:
        msg = json.loads((await self.ws.receive(timeout=30)).data)
        if msg.get("method") == "Network.webSocketFrameReceived":
            resp = msg["params"]["response"]
            data = resp["payloadData"]
            self.frames.append(base64.b64decode(data) if resp["opcode"] == 2 else data.encode())
        return msg

    def received(self) -> bytes:
        return b"".join(self.frames)


BLANK_PNG_BYTES = 20_000
"""A screenshot this big or smaller is a blank page, not the console painted."""

ANSI = re.compile(r"\x1b\[[0-9;?$]*[A-Za-z]")


def screen_text(data: bytes) -> str:
    return ANSI.sub("", data.decode("utf-8", "replace"))


async def browse(debug_port: int, url: str, want: list[str]) -> tuple[bytes, bytes]:
    """(everything the page's websocket received, a PNG screenshot once ``want`` arrived)"""
    async with aiohttp.ClientSession() as http:
        deadline = time.monotonic() + 30
        while True:
            try:
                async with http.get(f"http://127.0.0.1:{debug_port}/json") as resp:
                    targets = await resp.json()
                break
            except aiohttp.ClientError:
                assert time.monotonic() < deadline, "Chromium's DevTools never answered"
                await asyncio.sleep(0.2)
        page = next(t for t in targets if t["type"] == "page")
        async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            cdp = Cdp(ws)
            await cdp.call("Network.enable")
            await cdp.call("Page.enable")
            await cdp.call("Page.navigate", url=url)
            deadline = time.monotonic() + 60
            while not all(re.search(w, screen_text(cdp.received())) for w in want):
                assert time.monotonic() < deadline, (
                    f"the browser never received {want}: {cdp.received()[-2000:]!r}")
                await cdp.pump()
            # The terminal paints what arrived on its own frames: until a screenshot shows
            # more than a blank page (a fixed 1.5 s was a guess a loaded machine can outlast).
            deadline = time.monotonic() + 30
            while True:
                await asyncio.sleep(0.5)
                png = base64.b64decode(
                    (await cdp.call("Page.captureScreenshot", format="png"))["data"])
                if len(png) > BLANK_PNG_BYTES or time.monotonic() > deadline:
                    return cdp.received(), png


@pytest.mark.needs("chromium")
@pytest.mark.timeout(240)
def test_the_overview_with_nodes_reaches_a_real_browser(mosquitto, tmp_path):
    url = str(mosquitto.url)
    web_port, debug_port = free_port(), free_port()
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", "6", "--jobs", "0",
                log=tmp_path / "sim.log")
    serve = spawn("serve", "--broker", url, "--cluster", CLUSTER, "--port", str(web_port),
                  log=tmp_path / "serve.log")
    chrome = None
    try:
        wait_port(web_port)
        exe = shutil.which("chromium")
        assert exe is not None
        chrome = subprocess.Popen(
            [exe, *CHROMIUM_FLAGS, f"--remote-debugging-port={debug_port}",
             f"--user-data-dir={tmp_path / 'chrome'}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=(tmp_path / "chrome.log").open("wb"))
        shot = tmp_path / "serve.png"
        got, png = asyncio.run(browse(debug_port, f"http://127.0.0.1:{web_port}/",
                                 [r"fleetdeck web \[R\]", r"Nodes 6\b", r"Health ok 6\b",
                                  r"gpu0001 gpu0"]))
        shot.write_bytes(png)
        assert "Traceback" not in screen_text(got)
        assert png.startswith(b"\x89PNG") and len(png) > BLANK_PNG_BYTES, len(png)
    finally:
        if chrome is not None:
            chrome.terminate()
            chrome.wait(10)
        assert stop_process(serve) == 0, (tmp_path / "serve.log").read_text()
        stop_process(sim)


def test_commands_from_the_browser_need_an_operator():
    assert "--read-only" in console_command("c", allow_commands=False, operator=None, tick_s=0.5)
    cmd = console_command("c", allow_commands=True, operator="alice", tick_s=0.5)
    assert "--read-only" not in cmd and "--operator alice" in cmd
    with pytest.raises(UserError, match="needs --operator"):
        console_command("c", allow_commands=True, operator=None, tick_s=0.5)


def test_serve_on_a_busy_port_is_one_sentence(mosquitto, tmp_path):
    """Bind first, then announce: it printed its "console … on http://…" banner (and
    textual-serve's logo and "Serving …") before the error."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        res = run_cli("serve", "--broker", str(mosquitto.url), "--port", str(port))
    assert res.returncode == 2, res.stderr
    assert "cannot serve on 127.0.0.1" in res.stderr and "port is in use" in res.stderr
    assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1, res.stderr
    assert "Ctrl-C stops" not in res.stderr and res.stdout == "", res.stdout


def test_serve_announces_itself_once_it_listens(mosquitto, tmp_path):
    port = free_port()
    log = tmp_path / "serve.log"
    serve = spawn("serve", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--port",
                  str(port), log=log)
    try:
        wait_port(port)
        deadline = time.monotonic() + 10
        while "Ctrl-C stops" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        text = log.read_text()
        assert f"on http://127.0.0.1:{port} (read-only)" in text, text
        assert "Serving" not in text  # textual-serve's own banner, printed before it bound
    finally:
        assert stop_process(serve) == 0, log.read_text()


@pytest.mark.parametrize("bind", ["::1", "[::1]"])
def test_serve_on_ipv6_loopback_prints_a_url_a_browser_can_open(mosquitto, tmp_path, bind):
    """``--bind ::1`` printed ``http://::1:PORT`` (the last group reads as the port), and the
    page told the browser to open its websocket at ``ws://::1:PORT/ws``; ``--bind [::1]``, as
    a URL writes it, failed to bind."""
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "serve.log"
    serve = spawn("serve", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--bind", bind,
                  "--port", str(port), log=log)
    try:
        deadline = time.monotonic() + 30
        while "Ctrl-C stops" not in log.read_text() and time.monotonic() < deadline:
            assert serve.poll() is None, log.read_text()
            time.sleep(0.1)
        printed = re.search(r" on (http://\S+) \(read-only\)", log.read_text())
        assert printed is not None, log.read_text()
        assert printed[1] == f"http://[::1]:{port}"
        with urllib.request.urlopen(printed[1], timeout=10) as page:
            assert page.status == 200
            assert f"ws://[::1]:{port}/ws" in page.read().decode()
    finally:
        assert stop_process(serve) == 0, log.read_text()


async def drain_from_a_tab(web_port: int, node: str, reason: str) -> bytes:
    """What a browser tab does, over textual-serve's own websocket protocol: open the console,
    type ``:drain NODE``, the reason and Enter. Returns the screen bytes the tab received."""
    got: list[bytes] = []

    async def until(ws: aiohttp.ClientWebSocketResponse, pattern: str) -> None:
        deadline = time.monotonic() + 60
        while not re.search(pattern, screen_text(b"".join(got))):
            assert time.monotonic() < deadline, f"the tab never showed {pattern!r}: {got[-5:]}"
            msg = await ws.receive(timeout=30)
            if msg.type == aiohttp.WSMsgType.BINARY:
                got.append(msg.data)
            elif msg.type == aiohttp.WSMsgType.TEXT:
                got.append(msg.data.encode())
            else:
                raise AssertionError(f"the tab's websocket closed: {msg}")

    url = f"http://127.0.0.1:{web_port}/ws?width=160&height=48"
    async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
        await until(ws, r"Health ok")
        await ws.send_json(["stdin", f":drain {node}\r"])
        await until(ws, r"Reason \(required")
        await ws.send_json(["stdin", f"{reason}\r"])
        await until(ws, rf"drain {node}[^\n]*: (done|rejected|timed out)")
    return b"".join(got)


@pytest.mark.timeout(180)
def test_a_tab_signs_its_commands_with_serves_command_key(mosquitto, tmp_path, monkeypatch):
    """``serve --command-key`` took the key and never passed it on: every tab's console sent
    unsigned drains, which agents that obey only signed commands reject (docs/security.md,
    "Signed commands"). The tabs get it as $FLEETDECK_COMMAND_KEY_FILE, as the broker's
    credentials."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))  # the tab's audit log
    monkeypatch.delenv("FLEETDECK_COMMAND_KEY_FILE", raising=False)
    key = tmp_path / "command.key"
    key.write_bytes(b"w" * 32)
    key.chmod(0o600)
    url = str(mosquitto.url)
    web_port = free_port()
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", "3", "--jobs", "0",
                "--command-key", str(key), log=tmp_path / "sim.log")
    serve = spawn("serve", "--broker", url, "--cluster", CLUSTER, "--port", str(web_port),
                  "--allow-commands", "--operator", "alice", "--command-key", str(key),
                  log=tmp_path / "serve.log")
    try:
        wait_port(web_port)
        screen = screen_text(asyncio.run(drain_from_a_tab(web_port, "gpu0002", "served")))
        assert "Traceback" not in screen
        assert "drain gpu0002" in screen and "done (DRAINED)" in screen, screen[-3000:]
        assert "rejected command" not in (tmp_path / "sim.log").read_text()
    finally:
        assert stop_process(serve) == 0, (tmp_path / "serve.log").read_text()
        stop_process(sim)
