"""ServiceAccount tokens: what the kubelet mounts into a pod and the API server authenticates.

A token is minted by the TokenRequest API (`POST .../serviceaccounts/NAME/token`, group
authentication.k8s.io/v1, as the kubelet asks for a pod's projected `kube-api-access-*` token
and `kubectl create token NAME` does) and is a JWT whose claims are the real projected token's:
iss/aud `https://kubernetes.default.svc.cluster.local`, `sub` =
`system:serviceaccount:<ns>:<name>`, iat/nbf/exp and the private `kubernetes.io` claim naming
the namespace, the ServiceAccount (name, uid) and the pod it is bound to (name, uid) - after
kubernetes/kubernetes pkg/serviceaccount/claims.go. Differences: it is signed HS256 with a key
the KubeStore keeps in its folder (`sa-signing-key`, 0600; the real apiserver signs RS256 with
--service-account-signing-key-file), so it is stateless like the sandbox's sbx1 tokens.

Authentication (pkg/serviceaccount/claims.go Validate): the signature, exp/nbf, the
ServiceAccount still existing with the uid in the token and, for a bound token, the pod too
(a deleted pod's token stops working; the real one allows 60 s of grace after deletion, the
sandbox's store holds no deleted pods, so it stops at once). The user is
`system:serviceaccount:<ns>:<name>` in the groups system:serviceaccounts,
system:serviceaccounts:<ns> and system:authenticated (pkg/serviceaccount/util.go).

Expiry: the kubelet asks for 3607 s and the real apiserver, with
--service-account-extend-token-expiration (default true), makes such admission-injected tokens
live a year; the kubelet's tokens here live a year for that reason, so no refresh is needed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rltui.atomic import write_private
from rltui_sandbox.kube.errors import KubeError, invalid
from rltui_sandbox.kube.resources import resource

ISSUER = "https://kubernetes.default.svc.cluster.local"
SA_PREFIX = "system:serviceaccount:"
EXTENDED_SECONDS = 365 * 24 * 3600
KEY_FILE = "sa-signing-key"


@dataclass(frozen=True)
class User:
    """Who a request is from (the authenticator's user.Info)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = field(default=())

    @property
    def service_account(self) -> tuple[str, str] | None:
        """(namespace, name) for a ServiceAccount user."""
        if not self.name.startswith(SA_PREFIX):
            return None
        ns, _, name = self.name[len(SA_PREFIX):].partition(":")
        return ns, name


def service_account_user(namespace: str, name: str, uid: str = "") -> User:
    return User(f"{SA_PREFIX}{namespace}:{name}", uid,
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"))


def load_key(root: Path | None) -> bytes:
    """The signing key, kept in the store's folder (made once, 0600); random without a folder."""
    if root is None:
        return secrets.token_bytes(32)
    path = Path(root) / KEY_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_private(path, secrets.token_hex(32))
    return bytes.fromhex(path.read_text().strip())


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def mint(key: bytes, sa: dict, *, pod: dict | None = None, node: dict | None = None,
         seconds: int = EXTENDED_SECONDS, audiences: list[str] | None = None,
         clock: float | None = None) -> tuple[str, int]:
    """(JWT, expiry as Unix seconds) for ServiceAccount `sa`, bound to `pod` when given."""
    now = int(time.time() if clock is None else clock)
    meta = sa["metadata"]
    private: dict[str, Any] = {"namespace": meta["namespace"],
                               "serviceaccount": {"name": meta["name"], "uid": meta["uid"]}}
    if pod is not None:
        private["pod"] = {"name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
    if node is not None:
        private["node"] = {"name": node["metadata"]["name"], "uid": node["metadata"]["uid"]}
    expiry = now + seconds
    claims = {"aud": audiences or [ISSUER], "exp": expiry, "iat": now, "iss": ISSUER,
              "jti": secrets.token_hex(16), "kubernetes.io": private, "nbf": now,
              "sub": f"{SA_PREFIX}{meta['namespace']}:{meta['name']}"}
    header = {"alg": "HS256", "kid": hashlib.sha256(key).hexdigest()[:16], "typ": "JWT"}
    body = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
    mac = hmac.new(key, body.encode(), hashlib.sha256).digest()
    return f"{body}.{_b64(mac)}", expiry


def claims_of(key: bytes, token: str, clock: float | None = None) -> dict | None:
    """The token's claims if its signature and times are good, else None."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        mac = _unb64(parts[2])
        claims = json.loads(_unb64(parts[1]))
    except (ValueError, json.JSONDecodeError):
        return None
    want = hmac.new(key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(mac, want) or not isinstance(claims, dict):
        return None
    now = time.time() if clock is None else clock
    if not isinstance(claims.get("exp"), int) or claims["exp"] <= now or claims.get("nbf", 0) > now + 60:
        return None
    return claims


def authenticate(store: Any, token: str | None) -> User | None:
    """The ServiceAccount user behind `token`, or None (the request is then 401)."""
    if not token:
        return None
    claims = claims_of(store.sa_key, token)
    private = (claims or {}).get("kubernetes.io")
    if not isinstance(private, dict):
        return None
    ns, sa = str(private.get("namespace") or ""), private.get("serviceaccount") or {}
    found = store.list_sync("serviceaccounts", ns, field_selector=f"metadata.name={sa.get('name')}")
    if not found or found[0]["metadata"]["uid"] != sa.get("uid"):
        return None
    pod = private.get("pod")
    if pod is not None:
        pods = store.list_sync("pods", ns, field_selector=f"metadata.name={pod.get('name')}")
        if not pods or pods[0]["metadata"]["uid"] != pod.get("uid"):
            return None
    return service_account_user(ns, sa["name"], sa["uid"])


def _stamp(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


async def token_request(store: Any, namespace: str, name: str, body: Any) -> dict:
    """POST .../serviceaccounts/NAME/token: the TokenRequest with status.token filled in.
    Validation after pkg/apis/authentication/validation (expirationSeconds at least 10 minutes,
    at most 2^32 s) and the registry's bound-object check (the pod must exist with that uid)."""
    sa = await store.get("serviceaccounts", name, namespace)
    body = body if isinstance(body, dict) else {}
    spec = dict(body.get("spec") or {})
    seconds = int(spec.get("expirationSeconds") or 3600)
    rtype = resource("serviceaccounts")
    if seconds < 600:
        raise invalid(rtype, name, "spec.expirationSeconds", "FieldValueInvalid",
                      f"Invalid value: {seconds}: may not specify a duration less than 10 minutes")
    if seconds > 1 << 32:
        raise invalid(rtype, name, "spec.expirationSeconds", "FieldValueTooLong",
                      f"Invalid value: {seconds}: may not specify a duration larger than 2^32 seconds")
    pod = None
    ref = spec.get("boundObjectRef")
    if isinstance(ref, dict) and ref.get("kind") == "Pod":
        pod = await store.get("pods", ref.get("name", ""), namespace)
        if ref.get("uid") and ref["uid"] != pod["metadata"]["uid"]:
            raise KubeError(409, "Conflict", f"the UID in the bound object reference ({ref['uid']}) does not "
                            f"match the UID in record. The object might have been deleted and then recreated")
    token, expiry = mint(store.sa_key, sa, pod=pod, seconds=seconds, audiences=spec.get("audiences"))
    spec.setdefault("audiences", [ISSUER])
    spec["expirationSeconds"] = seconds
    return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": name, "namespace": namespace,
                         "creationTimestamp": _stamp(int(time.time()))},
            "spec": spec, "status": {"token": token, "expirationTimestamp": _stamp(expiry)}}


def admit_pod(store: Any, pod: dict, namespace: str) -> None:
    """The ServiceAccount admission plugin's check (plugin/pkg/admission/serviceaccount/
    admission.go): a pod naming a ServiceAccount that does not exist is refused with 403
    `pods "<name or generateName>" is forbidden: error looking up service account <ns>/<sa>:
    serviceaccount "<sa>" not found` (the name falls back to generateName as
    apiserver/pkg/admission/errors.go extractResourceName does). The `default` account, which
    the ServiceAccount controller keeps in every namespace, is taken to exist without an object;
    the plugin's token volume is not injected (the sandbox's kubelet mounts it itself)."""
    spec = pod.get("spec") or {}
    name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    if name == "default" or store.list_sync("serviceaccounts", namespace, field_selector=f"metadata.name={name}"):
        return
    meta = pod.get("metadata") or {}
    shown = meta.get("name") or meta.get("generateName") or ""
    raise KubeError(403, "Forbidden", f'pods "{shown}" is forbidden: error looking up service account '
                    f'{namespace}/{name}: serviceaccount "{name}" not found', {"name": shown, "kind": "pods"})
