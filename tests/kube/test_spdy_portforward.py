"""`kubectl port-forward` (the installed kubectl, 1.32) through the fake API server: SPDY/3.1 in a
WebSocket tunnel (kubectl's default since 1.31) and plain SPDY (KUBECTL_PORT_FORWARD_WEBSOCKETS
=false, and kubectl's own fallback), to a pod and to a service, as the codelab runs it."""

from __future__ import annotations

import os
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
import urllib.request
import zlib
from hashlib import sha256
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest

from rltui_sandbox.kube import spdy

KUBECTL = shutil.which("kubectl")
BODY = b'{"ray_version": "x", "dashboard": "fake"}'


class _Dashboard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = BODY if self.path == "/api/version" else b"x" * int(self.path.strip("/") or 0)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self) -> None:  # noqa: N802
        size = int(self.headers["Content-Length"])
        got = self.rfile.read(size)
        body = sha256(got).hexdigest().encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[int]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Dashboard)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def head(server, core, pod_manifest, running, dashboard) -> str:
    """A Running head pod whose :8265 is the dashboard, and the head service in front of it."""
    manifest = pod_manifest("ray-a4-gpu-spot-head-x1", labels={"ray.io/node-type": "head"})
    core.create_namespaced_pod("default", manifest)
    core.patch_namespaced_pod_status("ray-a4-gpu-spot-head-x1", "default", {"status": running})
    core.create_namespaced_service("default", {
        "metadata": {"name": "ray-a4-gpu-spot-head-svc"},
        "spec": {"clusterIP": "None", "selector": {"ray.io/node-type": "head"},
                 "ports": [{"name": "dashboard", "port": 8265, "targetPort": 8265}]}})
    server.call(server.store.set_port_target("default", "ray-a4-gpu-spot-head-x1", 8265, "127.0.0.1", dashboard))
    return "ray-a4-gpu-spot-head-x1"


class PortForward:
    """`kubectl port-forward TARGET :8265` left running; `port` is the local one it printed."""

    def __init__(self, server, tmp_path: Path, target: str, websockets: bool = True) -> None:
        env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
        if not websockets:
            env["KUBECTL_PORT_FORWARD_WEBSOCKETS"] = "false"
        self.log = tmp_path / f"pf-{time.monotonic_ns()}.log"
        self.proc = subprocess.Popen([str(KUBECTL), "--kubeconfig", str(server.kubeconfig), "port-forward",
                                      target, ":8265", "-v=4"], env=env, stdout=subprocess.PIPE,
                                     stderr=open(self.log, "w"), text=True)  # noqa: SIM115
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"Forwarding from 127\.0\.0\.1:(\d+) -> 8265", line)
        assert found, line + self.stderr()
        self.port = int(found.group(1))
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def stderr(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def get(self, path: str = "/api/version", data: bytes | None = None) -> bytes:
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data,
                                     method="PUT" if data is not None else "GET")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def forward(server, tmp_path) -> Iterator:
    started: list[PortForward] = []

    def make(target: str, websockets: bool = True) -> PortForward:
        started.append(PortForward(server, tmp_path, target, websockets))
        return started[-1]
    yield make
    for pf in started:
        pf.stop()


needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


@needs_kubectl
@pytest.mark.parametrize("websockets", [True, False], ids=["websocket-tunnel", "plain-spdy"])
def test_kubectl_port_forward_to_the_head_service_serves_http(head, forward, websockets, caplog) -> None:
    pf = forward("service/ray-a4-gpu-spot-head-svc", websockets)
    assert pf.get() == BODY
    assert pf.get() == BODY  # a second local connection: a second stream pair
    big = os.urandom(3 * 1024 * 1024)  # a working-dir upload's size, both ways
    assert pf.get("/", data=big) == sha256(big).hexdigest().encode()
    assert len(pf.get(f"/{2 * 1024 * 1024}")) == 2 * 1024 * 1024
    threads = [threading.Thread(target=pf.get) for _ in range(6)]  # concurrent connections
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert pf.proc.poll() is None, pf.stderr()
    pf.stop()
    log = pf.stderr()
    assert "an error occurred" not in log and "lost connection" not in log, log
    # -v=4 shows which dialer won (client-go tools/portforward tunneling_dialer.go).
    assert ("negotiated protocol: portforward.k8s.io" in log) == websockets, log
    assert "fallback to secondary dialer" not in log, log
    time.sleep(0.5)   # the server's side of the closed connection ends
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text


@needs_kubectl
def test_kubectl_to_a_pod_without_a_listener_reports_the_kubelets_error(server, core, pod_manifest, running,
                                                                       forward) -> None:
    core.create_namespaced_pod("default", pod_manifest("lonely"))
    core.patch_namespaced_pod_status("lonely", "default", {"status": running})
    pf = forward("pod/lonely")
    with pytest.raises(OSError):
        pf.get()
    pf.proc.wait(timeout=15)   # kubectl 1.32 gives up on the whole forward after an error
    log = pf.stderr()
    assert "an error occurred forwarding" in log and "connection refused" in log, log
    assert "lost connection to pod" in log, log


@needs_kubectl
def test_kubectl_cannot_forward_a_pending_pod(server, core, pod_manifest, tmp_path) -> None:
    core.create_namespaced_pod("default", pod_manifest("pending"))
    out = subprocess.run([str(KUBECTL), "--kubeconfig", str(server.kubeconfig), "port-forward", "pod/pending",
                          ":8265"], env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)},
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 1
    assert "unable to forward port because pod is not running. Current status=Pending" in out.stderr


# ---- the wire, without kubectl: what the server refuses ------------------------------------------


def test_the_header_dictionary_is_spdy3s() -> None:
    assert len(spdy.DICTIONARY) == 1423
    assert sha256(spdy.DICTIONARY).hexdigest() == "51d27341373f923f3cd88e1eb7162aeaa3723d7585ff2399201dc06498407f02"


def test_header_blocks_share_one_zlib_stream_per_direction() -> None:
    client, server = spdy.Framer(), spdy.Framer()
    first = client.syn_stream(1, {"streamtype": ["error"], "port": ["8265"], "requestid": ["0"]})
    second = client.syn_stream(3, {"streamtype": ["data"], "port": ["8265"], "requestid": ["0"]}, fin=True)
    wire = first + second
    frames = []
    for i in range(0, len(wire), 3):   # split anywhere, as WebSocket messages split it
        frames += server.feed(wire[i:i + 3])
    assert [(f.type, f.stream_id, f.header("streamType"), f.flags) for f in frames] == [
        (spdy.SYN_STREAM, 1, "error", 0), (spdy.SYN_STREAM, 3, "data", spdy.FLAG_FIN)]
    # The second block leans on the first's compression context: alone it cannot be read.
    with pytest.raises(spdy.SpdyError):
        spdy.Framer().feed(second)
    # Control frame layout: version 3, type, flags, 24-bit length (spdy/write.go).
    raw = spdy.Framer().rst_stream(7, spdy.CANCEL)
    assert struct.unpack(">HHIII", raw) == (0x8003, spdy.RST_STREAM, 8, 7, spdy.CANCEL)
    z = zlib.decompressobj(zdict=spdy.DICTIONARY)
    reply = spdy.Framer().syn_reply(1)
    assert z.decompress(reply[12:]) == b"\x00\x00\x00\x00"   # no headers, as the kubelet replies


def _raw(server, headers: dict[str, str], method: str = "POST", pod: str = "head") -> tuple[int, str, bytes]:
    """One request on a fresh TLS connection: (status, headers, what follows them)."""
    import ssl

    host, port = server.url.removeprefix("https://").split(":")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE   # the test's own server; the request is what is checked
    sock = ctx.wrap_socket(socket.create_connection((host, int(port)), timeout=10))
    token = re.search(r"token: (\S+)", server.kubeconfig.read_text()).group(1)
    lines = [f"{method} /api/v1/namespaces/default/pods/{pod}/portforward HTTP/1.1", f"Host: {host}:{port}",
             f"Authorization: Bearer {token}", "Content-Length: 0", *(f"{k}: {v}" for k, v in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    sock.settimeout(2)
    with pytest.raises(OSError) if status == 101 else _nothing():
        while True:   # the body of a refusal; an upgraded connection stays open
            chunk = sock.recv(65536)
            if not chunk:
                break
            rest += chunk
    sock.close()
    return status, head.decode(), rest


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return isinstance(exc[1], OSError)


@pytest.fixture
def running_head(core, pod_manifest, running) -> str:
    core.create_namespaced_pod("default", pod_manifest("head"))
    core.patch_namespaced_pod_status("head", "default", {"status": running})
    return "head"


def test_plain_spdy_upgrade_negotiates_portforward_k8s_io(server, running_head) -> None:
    base = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
    status, head, _ = _raw(server, {**base, "X-Stream-Protocol-Version": "portforward.k8s.io"})
    assert status == 101 and "X-Stream-Protocol-Version: portforward.k8s.io" in head
    status, head, body = _raw(server, {**base, "X-Stream-Protocol-Version": "v9.portforward.k8s.io"})
    assert status == 403 and "X-Accepted-Stream-Protocol-Versions: portforward.k8s.io" in head
    assert body == (b"unable to upgrade: unable to negotiate protocol: client supports "
                    b"[v9.portforward.k8s.io], server accepts [portforward.k8s.io]\n")
    # No protocol header: the kubelet's Handshake returns without writing anything.
    assert _raw(server, base)[0] == 200
    status, _, body = _raw(server, {"Connection": "Upgrade", "Upgrade": "h2c",
                                    "X-Stream-Protocol-Version": "portforward.k8s.io"})
    assert status == 400 and body.startswith(b"unable to upgrade: missing upgrade headers in request: http.Header{")
    status, _, body = _raw(server, {"X-Stream-Protocol-Version": "portforward.k8s.io"})
    assert status == 400 and b"Upgrade request required" in body
    assert _raw(server, {**base, "X-Stream-Protocol-Version": "portforward.k8s.io"}, method="PUT")[0] == 405


def test_a_tunnel_without_a_common_protocol_fails_the_handshake_so_kubectl_falls_back(server, running_head) -> None:
    ws = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    status, head, _ = _raw(server, {**ws, "Sec-WebSocket-Protocol": "SPDY/3.1+portforward.k8s.io"}, method="GET")
    assert status == 101 and "Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io" in head
    status, _, body = _raw(server, {**ws, "Sec-WebSocket-Protocol": "SPDY/3.1+v9.portforward.k8s.io"}, method="GET")
    assert status == 403 and b"server accepts [portforward.k8s.io]" in body
