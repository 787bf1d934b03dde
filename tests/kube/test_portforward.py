"""Port-forward through `kubernetes.stream.portforward`, the way the wizard reaches :8265."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.stream import portforward

BODY = b'{"ray_version": "2.60.0", "dashboard": "fake"}'


class _Dashboard(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like the Ray dashboard (aiohttp)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        body = BODY if self.path == "/api/version" else b"not found"
        self.send_response(200 if self.path == "/api/version" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def dashboard() -> Iterator[int]:
    """A tiny HTTP server standing in for the Ray head's dashboard."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Dashboard)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _get(pf, port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("ray-head", port, timeout=5)
    conn.sock = pf.socket(port)
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


def test_http_through_the_port_forward(server, core: client.CoreV1Api, dashboard: int, pod_manifest, running) -> None:
    core.create_namespaced_pod("default", pod_manifest("ray-a4-gpu-spot-head"))
    core.patch_namespaced_pod_status("ray-a4-gpu-spot-head", "default", {"status": running})
    server.call(server.store.set_port_target("default", "ray-a4-gpu-spot-head", 8265, "127.0.0.1", dashboard))
    pf = portforward(core.connect_get_namespaced_pod_portforward, "ray-a4-gpu-spot-head", "default", ports="8265")
    assert _get(pf, 8265, "/api/version") == (200, BODY)
    assert _get(pf, 8265, "/nope")[0] == 404  # the same connection stays usable (keep-alive)
    pf.close()
    assert pf.error(8265) is None


def test_no_listener_reports_on_the_error_channel(server, core: client.CoreV1Api, pod_manifest, running) -> None:
    core.create_namespaced_pod("default", pod_manifest("head"))
    core.patch_namespaced_pod_status("head", "default", {"status": running})
    pf = portforward(core.connect_get_namespaced_pod_portforward, "head", "default", ports="8265")
    sock = pf.socket(8265)
    sock.settimeout(5)
    assert sock.recv(1024) == b""  # closed once the error arrives
    assert "connection refused" in pf.error(8265)


def test_a_pending_pod_cannot_be_forwarded(server, core: client.CoreV1Api, pod_manifest, dashboard: int) -> None:
    core.create_namespaced_pod("default", pod_manifest("head"))
    server.call(server.store.set_port_target("default", "head", 8265, "127.0.0.1", dashboard))
    pf = portforward(core.connect_get_namespaced_pod_portforward, "head", "default", ports="8265")
    sock = pf.socket(8265)
    sock.settimeout(5)
    assert sock.recv(1024) == b""
    assert "pod is not running" in pf.error(8265)


def test_a_missing_pod_refuses_the_upgrade(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as caught:
        portforward(core.connect_get_namespaced_pod_portforward, "nope", "default", ports="8265")
    assert "404" in str(caught.value.reason)
