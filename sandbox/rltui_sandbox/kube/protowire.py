"""Just enough of Kubernetes' protobuf encoding to read a SelfSubjectAccessReview, which
`kubectl auth can-i` (a typed client-go call) sends as protobuf only.

The envelope (k8s.io/apimachinery/pkg/runtime/serializer/protobuf): the magic bytes
`k8s\\x00`, then a runtime.Unknown message {1: typeMeta {1: apiVersion, 2: kind}, 2: raw, 3:
contentEncoding, 4: contentType}; `raw` is the object's message, here
k8s.io/api/authorization/v1 generated.proto: SelfSubjectAccessReview {1: metadata, 2: spec},
SelfSubjectAccessReviewSpec {1: resourceAttributes, 2: nonResourceAttributes},
ResourceAttributes {1: namespace, 2: verb, 3: group, 4: version, 5: resource, 6: subresource,
7: name}, NonResourceAttributes {1: path, 2: verb}.
"""

from __future__ import annotations

MAGIC = b"k8s\x00"


class ProtoError(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise ProtoError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> dict[int, bytes]:
    """The length-delimited fields of a message (last wins); other wire types are skipped."""
    out: dict[int, bytes] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 2:
            size, pos = _varint(data, pos)
            out[number] = data[pos:pos + size]
            pos += size
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ProtoError(f"unsupported wire type {wire}")
    return out


def _strings(data: bytes, names: dict[int, str]) -> dict[str, str]:
    got = fields(data)
    return {name: got[n].decode() for n, name in names.items() if n in got}


def access_review(body: bytes) -> dict:
    """A protobuf SelfSubjectAccessReview as its JSON form."""
    if not body.startswith(MAGIC):
        raise ProtoError("not a Kubernetes protobuf envelope")
    unknown = fields(body[len(MAGIC):])
    spec = fields(fields(unknown.get(2, b"")).get(2, b""))
    out: dict = {}
    if 1 in spec:
        out["resourceAttributes"] = _strings(spec[1], {1: "namespace", 2: "verb", 3: "group", 4: "version",
                                                       5: "resource", 6: "subresource", 7: "name"})
    if 2 in spec:
        out["nonResourceAttributes"] = _strings(spec[2], {1: "path", 2: "verb"})
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "spec": out}
