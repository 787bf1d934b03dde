"""Shared pieces of the sandbox's gRPC services: the cloud's error kinds, handler registration
with fault injection, resource-name parsing, and the google.longrunning operations store.
Every handler runs as its caller (record.Record.acting_as, from the call's metadata), so the
operations it starts record the caller's user agent.

The error classes carry google.rpc code names so the same World methods can back gRPC services
here and the fake gcloud/xpk executables later (which print the message and exit non-zero).
"""

from __future__ import annotations

import base64
import contextvars
import inspect
import re
import weakref
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, Mapping, Union

import grpc
from google.longrunning import operations_pb2
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from rltui_sandbox.faults import Faults
from rltui_sandbox.record import Record, caller_agent


class CloudError(Exception):
    """A refusal the real API would answer with `code` (a google.rpc code name).

    `reason` (+ `domain`, `metadata`) is the google.rpc.ErrorInfo Google attaches to its errors
    (AIP-193): clients decide from it, never from the wording. Sent in the gRPC status details
    (`grpc-status-details-bin`) and in the REST error JSON's `details`.
    """

    code = "UNKNOWN"

    def __init__(self, message: str, *, reason: str = "", domain: str = "googleapis.com",
                 metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.domain = domain
        self.metadata = dict(metadata or {})

    def status_proto(self, code: grpc.StatusCode | None = None) -> status_pb2.Status:
        """google.rpc.Status with the ErrorInfo (when there is a reason) packed in details."""
        status = status_pb2.Status(code=rpc_code(code or self.status_code), message=self.message)
        if self.reason:
            info = error_details_pb2.ErrorInfo(reason=self.reason, domain=self.domain,
                                               metadata=self.metadata)
            status.details.add().Pack(info)
        return status

    @property
    def status_code(self) -> grpc.StatusCode:
        return grpc.StatusCode[self.code]


class InvalidArgument(CloudError):
    code = "INVALID_ARGUMENT"


class NotFound(CloudError):
    code = "NOT_FOUND"


class AlreadyExists(CloudError):
    code = "ALREADY_EXISTS"


class FailedPrecondition(CloudError):
    code = "FAILED_PRECONDITION"


class Unimplemented(CloudError):
    code = "UNIMPLEMENTED"


class PermissionDenied(CloudError):
    code = "PERMISSION_DENIED"


class ResourceExhausted(CloudError):
    code = "RESOURCE_EXHAUSTED"


def rpc_code(code: grpc.StatusCode) -> int:
    """The google.rpc.Code number of a grpc.StatusCode (what Operation.error.code holds)."""
    return code.value[0]


# Transient codes a fault may answer with; the real clients' retry predicates know both.
TRANSIENT_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)

Handler = Callable[[Any], Union[Any, Awaitable[Any]]]
# method name -> (handler, request type, response type); types are proto-plus or raw protobuf.
Rpcs = Mapping[str, tuple[Handler, type, type]]


def _deserializer(cls: type) -> Callable[[bytes], Any]:
    return cls.deserialize if hasattr(cls, "pb") else cls.FromString  # proto-plus vs raw protobuf


def _serializer(cls: type) -> Callable[[Any], bytes]:
    return cls.serialize if hasattr(cls, "pb") else cls.SerializeToString


# The bearer token of the call a handler serves (None without one): the `authorization` metadata
# the Google clients send; iam_authz maps it to a principal.
BEARER: contextvars.ContextVar[str | None] = contextvars.ContextVar("rltui_sandbox_bearer", default=None)


def _bearer_of(context: grpc.aio.ServicerContext) -> str | None:
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str) and value[:7].lower() == "bearer ":
            return value[7:].strip() or None
    return None


# (service full name, request) -> None, or raises a CloudError (e.g. the API is disabled).
Gate = Callable[[str, Any], None]
_GUARDS: "weakref.WeakKeyDictionary[Any, tuple[Gate | None, Record | None]]" = weakref.WeakKeyDictionary()


def guard(server: grpc.aio.Server, *, gate: Gate | None = None, record: "Record | None" = None) -> None:
    """Make every service later registered on `server` with add_service check `gate` first
    (World.gate_grpc: is the API enabled in the request's project?) and count its calls in
    `record`, without each service module passing them. Call before add_service."""
    _GUARDS[server] = (gate, record)


def _agent_of(context: grpc.aio.ServicerContext) -> str:
    """The caller's user agent from the call's metadata: `user-agent` as grpc sent it, then
    `x-goog-api-client` (where the Google clients put ClientInfo.user_agent): record.caller_agent."""
    received = {key: value for key, value in (context.invocation_metadata() or ()) if isinstance(value, str)}
    return caller_agent(received.get("user-agent"), received.get("x-goog-api-client"))


def _wrap(channel: str, fn: Handler, faults: Faults | None, record: "Record | None" = None,
          gate: Gate | None = None, service: str = "") -> Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]:
    async def handler(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if record is not None:
            record.count(channel)
        if faults is not None and faults.hit(channel):
            code = faults.choice(channel, TRANSIENT_CODES)
            await context.abort(code, f"sandbox fault injection: {channel} answered {code.name}; retry")
        token = BEARER.set(_bearer_of(context))
        try:
            with Record.acting_as(_agent_of(context)):
                if gate is not None:
                    gate(service, request)
                result = fn(request)
                if inspect.isawaitable(result):
                    result = await result
            return result
        except CloudError as exc:
            metadata = ()
            if exc.reason:
                metadata = (("grpc-status-details-bin", exc.status_proto().SerializeToString()),)
            await context.abort(exc.status_code, exc.message, metadata)
        finally:
            BEARER.reset(token)

    return handler


def add_service(server: grpc.aio.Server, service: str, rpcs: Rpcs, faults: Faults | None,
                record: "Record | None" = None) -> None:
    """Register `service` (full proto name) on `server`; faults use channel grpc:<Short>/<Method>,
    and `record` counts each call under that name. The server's `guard` (if any) supplies the gate
    and the record when none is passed."""
    short = service.rsplit(".", 1)[-1]
    gate, guard_record = _GUARDS.get(server, (None, None))
    record = record if record is not None else guard_record
    handlers = {
        method: grpc.unary_unary_rpc_method_handler(
            _wrap(f"grpc:{short}/{method}", fn, faults, record, gate, service),
            request_deserializer=_deserializer(req),
            response_serializer=_serializer(resp),
        )
        for method, (fn, req, resp) in rpcs.items()
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, handlers),))


def parse_name(template: str, name: str, field: str = "name") -> dict[str, str]:
    """Split `name` by a template like 'projects/{project}/locations/{location}'."""
    pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template)) + "$"
    match = re.match(pattern, name)
    if match is None:
        raise InvalidArgument(f"{field} {name!r} is malformed: expected {template}")
    return match.groupdict()


def page(items: list[Any], page_size: int, page_token: str) -> tuple[list[Any], str]:
    """Offset paging: (this page, next_page_token or '')."""
    try:
        start = int(page_token) if page_token else 0
    except ValueError:
        raise InvalidArgument(f"page_token {page_token!r} is invalid") from None
    if page_size <= 0:
        return items[start:], ""
    end = start + page_size
    return items[start:end], (str(end) if end < len(items) else "")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _pack(msg: Any) -> any_pb2.Any:
    raw = type(msg).pb(msg) if hasattr(type(msg), "pb") else msg
    packed = any_pb2.Any()
    packed.Pack(raw)
    return packed


class LroStore:
    """google.longrunning operations by full name, kept as protobufs (persisted as base64)."""

    def __init__(self) -> None:
        self._ops: dict[str, operations_pb2.Operation] = {}

    def start(self, name: str, metadata: Any) -> operations_pb2.Operation:
        op = operations_pb2.Operation(name=name, done=False, metadata=_pack(metadata))
        self._ops[name] = op
        return self.get(name)

    def get(self, name: str) -> operations_pb2.Operation:
        if name not in self._ops:
            raise NotFound(f"Operation '{name}' was not found")
        copy = operations_pb2.Operation()
        copy.CopyFrom(self._ops[name])
        return copy

    def running(self, name: str) -> bool:
        return name in self._ops and not self._ops[name].done

    def list(self, collection: str) -> list[operations_pb2.Operation]:
        prefix = collection.rstrip("/") + "/operations/"
        return [self.get(n) for n in sorted(self._ops) if n.startswith(prefix)]

    def finish(self, name: str, *, metadata: Any, response: Any = None, error: CloudError | None = None,
               error_code: grpc.StatusCode | None = None) -> None:
        op = self._ops[name]
        op.metadata.CopyFrom(_pack(metadata))
        op.done = True
        if error is not None:
            op.error.CopyFrom(error.status_proto(error_code))
        else:
            op.response.CopyFrom(_pack(response))

    def set_metadata(self, name: str, metadata: Any) -> None:
        """A running operation's new metadata (a transfer's counters as it goes)."""
        self._ops[name].metadata.CopyFrom(_pack(metadata))

    def metadata(self, name: str, cls: type) -> Any:
        """The operation's metadata unpacked as proto-plus `cls`."""
        return cls.deserialize(self._ops[name].metadata.value)

    def delete(self, name: str) -> None:
        if self._ops.pop(name, None) is None:
            raise NotFound(f"Operation '{name}' was not found")

    def dump(self) -> dict[str, str]:
        return {n: base64.b64encode(op.SerializeToString()).decode() for n, op in self._ops.items()}

    def load(self, data: Mapping[str, str]) -> None:
        self._ops = {n: operations_pb2.Operation.FromString(base64.b64decode(b)) for n, b in data.items()}
