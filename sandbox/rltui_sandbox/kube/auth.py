"""Who may call the sandbox's Kubernetes API: bearer tokens, an OAuth2 token endpoint, an ADC file.

- Access tokens are issued by `POST /token` (Google's OAuth2 token endpoint, answering
  `{"access_token", "expires_in", "token_type": "Bearer"}`) and live `lifetime_s` (1 hour, as
  Google's do, so clients really refresh). They are stateless (`sbx1.<expiry>.<HMAC>` under a
  per-folder secret), so they stay valid across a daemon restart until they expire.
- `SANDBOX_TOKEN` (the fixed token the sandbox's kubeconfigs and the gcloud access-token file
  hold) is always valid.
- `write_adc` writes a `service_account` Application Default Credentials file (a key made once
  per folder) whose `token_uri` is that endpoint: `google.auth.load_credentials_from_file` and
  `credentials.refresh(Request())` work unmodified (the JWT-bearer grant below). Not
  `authorized_user`: google-auth (2.63 here) ignores such a file's `token_uri` ("always
  overrides" with oauth2.googleapis.com in Credentials.from_authorized_user_info), so it could never refresh
  against a sandbox; a service account's `token_uri` is honoured.
- `POST /token` accepts Google's two grants: `urn:ietf:params:oauth:grant-type:jwt-bearer` (an
  assertion signed by the sandbox service account's key, audience this endpoint) and
  `refresh_token` (the issuer's refresh token, for authorized_user clients that honour a URI).
- `guard_middleware`: on the HTTPS site (the cluster endpoint) every request needs a valid token
  (else 401, a Kubernetes Status, reason Unauthorized) - the issuer's (the project owner's: all
  powerful) or a pod's ServiceAccount token (serviceaccounts.py; RBAC then decides, rbac.py) -
  and only Kubernetes paths exist; on the
  plain-http site (Google-API surfaces, control routes, this token endpoint) Kubernetes paths
  do not exist, except `/version` (the daemon's readiness probe: no cluster state).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from aiohttp import web

from rltui.atomic import write_private
from .kubeconfig import SANDBOX_TOKEN

TOKEN_LIFETIME_S = 3600
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
SERVICE_ACCOUNT = "rltui-sandbox@rltui-sandbox.iam.gserviceaccount.com"
_PREFIX = "sbx1"
KUBE_PATHS = ("/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz")


def is_kube_path(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in KUBE_PATHS)


@dataclass
class TokenIssuer:
    secret: bytes
    lifetime_s: int = TOKEN_LIFETIME_S
    fixed: tuple[str, ...] = (SANDBOX_TOKEN,)
    clock: Callable[[], float] = field(default=time.time)

    @classmethod
    def load(cls, folder: Path, **kwargs) -> "TokenIssuer":
        """The issuer whose secret is `folder/token-secret` (made once, 0600)."""
        folder = Path(folder)
        path = folder / "token-secret"
        if not path.exists():
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            write_private(path, secrets.token_hex(32))
        return cls(bytes.fromhex(path.read_text().strip()), folder=folder, **kwargs)

    def _mac(self, text: str) -> str:
        return hmac.new(self.secret, text.encode(), hashlib.sha256).hexdigest()

    @property
    def refresh_token(self) -> str:
        return "1//sbx-" + self._mac("refresh-token")[:40]

    # The sandbox's service account: its key is made once, beside the secret.
    folder: Path | None = None

    def service_account_key(self) -> bytes:
        """PEM (PKCS#8) of the service account's RSA key, made the first time (0600)."""
        if self.folder is None:
            raise RuntimeError("TokenIssuer.load(folder) first: the key lives in the folder")
        path = self.folder / "service-account.key"
        if not path.exists():
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import rsa

            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            write_private(path, key.private_bytes(serialization.Encoding.PEM,
                                                  serialization.PrivateFormat.PKCS8,
                                                  serialization.NoEncryption()))
        return path.read_bytes()

    def public_key_pem(self) -> bytes:
        from cryptography.hazmat.primitives import serialization

        key = serialization.load_pem_private_key(self.service_account_key(), None)
        return key.public_key().public_bytes(serialization.Encoding.PEM,
                                             serialization.PublicFormat.SubjectPublicKeyInfo)

    def assertion_ok(self, assertion: str, audience: str) -> bool:
        from google.auth import jwt

        try:
            # google-auth signs for Google's token endpoint whatever token_uri says, and Google
            # accepts that audience; so does the sandbox (and its own URL).
            claims = jwt.decode(assertion, certs=self.public_key_pem().decode(),
                                audience=[audience, GOOGLE_TOKEN_URI])
        except (ValueError, Exception):  # noqa: BLE001 - any bad assertion is invalid_grant
            return False
        return claims.get("iss") == SERVICE_ACCOUNT

    def issue(self, lifetime_s: int | None = None) -> tuple[str, int]:
        """(access token, seconds it lives)."""
        lifetime = self.lifetime_s if lifetime_s is None else lifetime_s
        expiry = int(self.clock()) + lifetime
        body = f"{_PREFIX}.{expiry}"
        return f"{body}.{self._mac(body)}", lifetime

    def valid(self, token: str | None) -> bool:
        if not token:
            return False
        if any(hmac.compare_digest(token, t) for t in self.fixed):
            return True
        parts = token.split(".")
        if len(parts) != 3 or parts[0] != _PREFIX or not parts[1].isdigit():
            return False
        if not hmac.compare_digest(parts[2], self._mac(f"{parts[0]}.{parts[1]}")):
            return False
        return int(parts[1]) > self.clock()


def bearer(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


def unauthorized() -> web.Response:
    return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {},
                              "status": "Failure", "message": "Unauthorized",
                              "reason": "Unauthorized", "code": 401}, status=401)


def guard_middleware(issuer: TokenIssuer, store: Any = None):
    """With `store`, a ServiceAccount token (serviceaccounts.py) is accepted too: its user is
    put on the request (api.USER) for RBAC (rbac.py); the issuer's tokens are the owner's."""
    from .api import USER
    from .serviceaccounts import authenticate

    @web.middleware
    async def guard(request: web.Request, handler):
        kube = is_kube_path(request.path)
        if request.secure:
            token = bearer(request)
            if not issuer.valid(token):
                user = authenticate(store, token) if store is not None else None
                if user is None:
                    return unauthorized()
                request[USER] = user
            elif request.headers.get("Impersonate-User"):
                request[USER] = impersonated(request)
            if not kube:
                return web.Response(status=404, text="404 page not found\n", content_type="text/plain")
        elif kube and request.path != "/version":
            return web.Response(
                status=404, content_type="text/plain",
                text="404: the sandbox's Kubernetes API is served over https at the GKE cluster's"
                     " endpoint (status key kube_server) with a bearer token\n")
        return await handler(request)
    return guard


def impersonated(request: web.Request) -> Any:
    """The user an owner's request acts as with `Impersonate-User` (kubectl --as, --as-group),
    as the apiserver's impersonation filter builds it (staging/src/k8s.io/apiserver/pkg/
    endpoints/filters/impersonation.go): a ServiceAccount name gets the groups
    system:serviceaccounts and system:serviceaccounts:<ns>, every user system:authenticated.
    The owner may impersonate anyone (as a cluster admin may)."""
    from .serviceaccounts import SA_PREFIX, User, service_account_user

    name = request.headers["Impersonate-User"]
    groups = tuple(request.headers.getall("Impersonate-Group", []))
    if name.startswith(SA_PREFIX) and name.count(":") == 3:
        ns, sa = name[len(SA_PREFIX):].split(":")
        base = service_account_user(ns, sa)
        return User(base.name, "", tuple(dict.fromkeys((*base.groups, *groups))))
    return User(name, "", tuple(dict.fromkeys((*groups, "system:authenticated"))))


def add_token_route(app: web.Application, issuer: TokenIssuer) -> None:
    """POST /token: Google's OAuth2 token endpoint, refresh grant only."""

    async def token(request: web.Request) -> web.Response:
        form = await request.post()
        grant = form.get("grant_type")
        if grant == JWT_GRANT:
            audience = str(request.url.with_query(None))
            ok = await asyncio.to_thread(issuer.assertion_ok, str(form.get("assertion") or ""), audience)
            if not ok:
                return web.json_response({"error": "invalid_grant",
                                          "error_description": "Invalid JWT Signature."}, status=400)
        elif grant == "refresh_token":
            if not hmac.compare_digest(str(form.get("refresh_token") or ""), issuer.refresh_token):
                return web.json_response({"error": "invalid_grant", "error_description": "Bad Request"},
                                         status=400)
        else:
            return web.json_response({"error": "unsupported_grant_type",
                                      "error_description": "Invalid grant_type"}, status=400)
        access, lifetime = issuer.issue()
        body = {"access_token": access, "expires_in": lifetime, "token_type": "Bearer"}
        if form.get("scope"):
            body["scope"] = str(form["scope"])
        return web.json_response(body, headers={"Cache-Control": "no-store"})

    app.router.add_post("/token", token)


def write_adc(path: Path, token_uri: str, issuer: TokenIssuer) -> Path:
    """A `service_account` ADC file (0600) whose tokens come from `token_uri`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    key = issuer.service_account_key().decode()
    return write_private(path, json.dumps({
        "type": "service_account", "project_id": "rltui-sandbox",
        "private_key_id": hashlib.sha256(key.encode()).hexdigest()[:40], "private_key": key,
        "client_email": SERVICE_ACCOUNT, "client_id": "100000000000000000001",
        "token_uri": token_uri}, indent=2) + "\n")


__all__ = ["TokenIssuer", "add_token_route", "guard_middleware", "is_kube_path", "write_adc",
           "SANDBOX_TOKEN", "TOKEN_LIFETIME_S"]
