"""KubeError: a failure the HTTP layer turns into the apiserver's Status object."""

from __future__ import annotations

from typing import Any

from rltui_sandbox.kube.resources import ResourceType


class KubeError(Exception):
    def __init__(self, code: int, reason: str, message: str, details: dict[str, Any] | None = None,
                 retry_after: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Failure", "message": self.message, "reason": self.reason}
        if self.details is not None:
            out["details"] = self.details
        out["code"] = self.code
        return out

    def __repr__(self) -> str:
        return f"KubeError({self.code}, {self.reason!r}, {self.message!r})"


def _details(rtype: ResourceType, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.plural
    return details


def not_found(rtype: ResourceType, name: str) -> KubeError:
    return KubeError(404, "NotFound", f'{rtype.qualified} "{name}" not found', _details(rtype, name))


def already_exists(rtype: ResourceType, name: str) -> KubeError:
    return KubeError(409, "AlreadyExists", f'{rtype.qualified} "{name}" already exists',
                     _details(rtype, name))


def conflict(rtype: ResourceType, name: str) -> KubeError:
    return KubeError(409, "Conflict",
                     f'Operation cannot be fulfilled on {rtype.qualified} "{name}": the object has been '
                     "modified; please apply your changes to the latest version and try again",
                     _details(rtype, name))


def invalid(rtype: ResourceType, name: str, field: str, cause: str, message: str) -> KubeError:
    details = {"name": name, "group": rtype.group, "kind": rtype.kind,
               "causes": [{"reason": cause, "message": message, "field": field}]}
    if not rtype.group:
        del details["group"]
    return KubeError(422, "Invalid", f'{rtype.kind} "{name}" is invalid: {field}: {message}', details)


def bad_request(message: str) -> KubeError:
    return KubeError(400, "BadRequest", message)


def expired(requested: int, oldest: int) -> KubeError:
    return KubeError(410, "Expired", f"too old resource version: {requested} ({oldest})")
