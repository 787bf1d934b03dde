"""RBAC: which requests a ServiceAccount's token may make (the owner's tokens may make all).

After kubernetes/kubernetes:
- the request's attributes, staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go:
  GET on a collection is `list` (`watch` with ?watch=true or the /watch/ prefix), on an object
  `get`; POST `create`, PUT `update`, PATCH `patch`, DELETE `delete` (`deletecollection` on a
  collection); a list/watch whose fieldSelector is exactly `metadata.name=X` carries the name X;
- the match, plugin/pkg/auth/authorizer/rbac/rbac.go (RuleAllows: VerbMatches, APIGroupMatches,
  ResourceMatches - `*`, `resource/subresource`, `*/subresource` - and ResourceNameMatches: a
  rule with resourceNames never matches a request without a name, which is why, as the RBAC
  docs say (kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources),
  list/watch can be restricted by name only with a metadata.name field selector and create or
  deletecollection not at all); subjects per appliesToUser (ServiceAccount by namespace/name -
  the binding's namespace when the subject names none -, User by name, Group by group);
- the allow reason `RBAC: allowed by RoleBinding "<name>/<ns>" of Role "<role>" to
  ServiceAccount "<sa>/<ns>"` (the visitor's source String()) and the deny reason
  `RBAC: <the errors met>` (a binding naming a missing role), else none;
- the 403, staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go
  Forbidden/forbiddenMessage and apierrors.NewForbidden: `<resource>[ "<name>"] is forbidden: User
  "<user>" cannot <verb> resource "<resource>[/<sub>]" in API group "<group>" in the namespace
  "<ns>"` (`at the cluster scope` without one), details {name, group, kind: <resource>};
- what every authenticated user may do whatever the bindings (bootstrap ClusterRole
  system:basic-user, plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go): create
  selfsubjectaccessreviews and selfsubjectrulesreviews. Non-resource paths (/api, /version)
  are not checked: system:discovery allows them to everyone authenticated.
Not done: the escalation check on creating Roles/bindings (only the owner, who may do anything,
writes them here) and aggregated ClusterRoles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rltui_sandbox.kube.errors import KubeError, invalid
from rltui_sandbox.kube.resources import RBAC_GROUP, ResourceType
from rltui_sandbox.kube.serviceaccounts import User

RBAC_KINDS = ("roles", "rolebindings", "clusterroles", "clusterrolebindings")
# What system:basic-user grants every authenticated user (group, resource).
_BASIC_USER = {("authorization.k8s.io", "selfsubjectaccessreviews"),
               ("authorization.k8s.io", "selfsubjectrulesreviews"),
               ("authentication.k8s.io", "selfsubjectreviews")}


@dataclass(frozen=True)
class Attributes:
    user: User
    verb: str
    namespace: str
    api_group: str
    resource: str
    subresource: str = ""
    name: str = ""


def request_verb(method: str, has_name: bool, watching: bool) -> str:
    if method == "GET":
        return "watch" if watching else "get" if has_name else "list"
    if method == "DELETE":
        return "delete" if has_name else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def selector_name(field_selector: str | None) -> str:
    """X when the field selector is exactly `metadata.name=X` (or ==), else ""."""
    terms = [t for t in (field_selector or "").split(",") if t.strip()]
    if len(terms) != 1:
        return ""
    key, sep, value = terms[0].replace("==", "=").partition("=")
    return value.strip() if sep and key.strip() == "metadata.name" and not key.endswith("!") else ""


def _matches(values: list[str] | None, wanted: str) -> bool:
    return any(v == "*" or v == wanted for v in values or [])


def rule_allows(rule: dict, attrs: Attributes) -> bool:
    if not _matches(rule.get("verbs"), attrs.verb) or not _matches(rule.get("apiGroups"), attrs.api_group):
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    resources = rule.get("resources") or []
    if not any(r in ("*", combined) or (attrs.subresource and r == f"*/{attrs.subresource}") for r in resources):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _subject(subject: dict, binding_ns: str) -> str:
    kind, name = subject.get("kind", ""), subject.get("name", "")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_ns}"'
    return f'{kind} "{name}"'


def _applies(subject: dict, user: User, binding_ns: str) -> bool:
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        return user.service_account == (subject.get("namespace") or binding_ns, subject.get("name"))
    if kind == "User":
        return subject.get("name") == user.name
    if kind == "Group":
        return subject.get("name") in user.groups
    return False


def _role_rules(store: Any, ref: dict, namespace: str) -> tuple[list[dict], str | None]:
    kind, name = ref.get("kind"), ref.get("name", "")
    plural = "roles" if kind == "Role" else "clusterroles"
    found = store.list_sync(plural, namespace if kind == "Role" else None, field_selector=f"metadata.name={name}")
    if not found:
        what = "role" if kind == "Role" else "clusterrole"
        return [], f'{what}.{RBAC_GROUP} "{name}" not found'
    return list(found[0].get("rules") or []), None


def authorize(store: Any, attrs: Attributes) -> tuple[bool, str]:
    """(allowed, reason) for a ServiceAccount (or other non-owner) user."""
    if attrs.verb == "create" and (attrs.api_group, attrs.resource) in _BASIC_USER:
        return True, 'RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole ' \
                     '"system:basic-user" to Group "system:authenticated"'
    errors: list[str] = []
    # ClusterRoleBindings, then the request namespace's RoleBindings (VisitRulesFor's order).
    scopes = [("ClusterRoleBinding", store.list_sync("clusterrolebindings"), "")]
    if attrs.namespace:
        scopes.append(("RoleBinding", store.list_sync("rolebindings", attrs.namespace), attrs.namespace))
    for kind, bindings, ns in scopes:
        for binding in bindings:
            for subject in binding.get("subjects") or []:
                if not _applies(subject, attrs.user, ns):
                    continue
                rules, error = _role_rules(store, binding.get("roleRef") or {}, ns)
                if error:
                    errors.append(error)
                if any(rule_allows(r, attrs) for r in rules):
                    ref, name = binding["roleRef"], binding["metadata"]["name"] + (f"/{ns}" if ns else "")
                    return True, (f'RBAC: allowed by {kind} "{name}" of {ref["kind"]} "{ref["name"]}" to '
                                  f'{_subject(subject, ns)}')
    if not errors:
        return False, ""
    return False, "RBAC: " + (errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")


def forbidden(attrs: Attributes, reason: str = "") -> KubeError:
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    msg = (f'User "{attrs.user.name}" cannot {attrs.verb} resource "{resource}" in API group '
           f'"{attrs.api_group}" {where}')
    if reason:
        msg = f"{msg}: {reason}"
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    head = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    details: dict[str, Any] = {"name": attrs.name} if attrs.name else {}
    if attrs.api_group:
        details["group"] = attrs.api_group
    details["kind"] = attrs.resource
    return KubeError(403, "Forbidden", f"{head} is forbidden: {msg}", details)


def check(store: Any, attrs: Attributes) -> None:
    allowed, reason = authorize(store, attrs)
    if not allowed:
        raise forbidden(attrs, reason)


def access_review(store: Any, user: User | None, body: Any) -> dict:
    """POST selfsubjectaccessreviews: the review with status.allowed (and reason) filled in.
    `user` None is the owner, whom the sandbox (like GKE for a project owner) allows all."""
    body = body if isinstance(body, dict) else {}
    spec = body.get("spec") or {}
    res = spec.get("resourceAttributes")
    status: dict[str, Any]
    if user is None:
        status = {"allowed": True}
    elif not isinstance(res, dict):
        status = {"allowed": False}  # non-resource URLs: not modelled
    else:
        attrs = Attributes(user, res.get("verb", ""), res.get("namespace", ""), res.get("group", ""),
                           res.get("resource", ""), res.get("subresource", ""), res.get("name", ""))
        allowed, reason = authorize(store, attrs)
        status = {"allowed": allowed, **({"reason": reason} if reason else {})}
    return {"kind": "SelfSubjectAccessReview", "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "spec": spec, "status": status}


# ---- validation of the RBAC kinds (pkg/apis/rbac/validation/validation.go) ---------------------

def validate(rtype: ResourceType, obj: dict) -> None:
    name = obj["metadata"]["name"]
    if rtype.plural in ("roles", "clusterroles"):
        for i, rule in enumerate(obj.get("rules") or []):
            where = f"rules[{i}]"
            if not isinstance(rule, dict):
                raise invalid(rtype, name, where, "FieldValueInvalid", "Invalid value: must be an object")
            if not rule.get("verbs"):
                raise invalid(rtype, name, f"{where}.verbs", "FieldValueRequired",
                              "Required value: verbs must contain at least one value")
            if rule.get("nonResourceURLs"):
                if rtype.plural == "roles":
                    raise invalid(rtype, name, f"{where}.nonResourceURLs", "FieldValueInvalid",
                                  "Invalid value: namespaced rules cannot apply to non-resource URLs")
                continue
            if not rule.get("apiGroups"):
                raise invalid(rtype, name, f"{where}.apiGroups", "FieldValueRequired",
                              "Required value: resource rules must supply at least one api group")
            if not rule.get("resources"):
                raise invalid(rtype, name, f"{where}.resources", "FieldValueRequired",
                              "Required value: resource rules must supply at least one resource")
        return
    ref = obj.get("roleRef") or {}
    kinds = ("Role", "ClusterRole") if rtype.plural == "rolebindings" else ("ClusterRole",)
    if ref.get("apiGroup") != RBAC_GROUP:
        raise invalid(rtype, name, "roleRef.apiGroup", "FieldValueNotSupported",
                      f'Unsupported value: "{ref.get("apiGroup", "")}": supported values: "{RBAC_GROUP}"')
    if ref.get("kind") not in kinds:
        raise invalid(rtype, name, "roleRef.kind", "FieldValueNotSupported",
                      f'Unsupported value: "{ref.get("kind", "")}": supported values: '
                      + ", ".join(f'"{k}"' for k in kinds))
    if not ref.get("name"):
        raise invalid(rtype, name, "roleRef.name", "FieldValueRequired", "Required value")
    for i, subject in enumerate(obj.get("subjects") or []):
        where = f"subjects[{i}]"
        kind = subject.get("kind") if isinstance(subject, dict) else None
        if kind not in ("ServiceAccount", "User", "Group"):
            raise invalid(rtype, name, f"{where}.kind", "FieldValueNotSupported",
                          f'Unsupported value: "{kind}": supported values: "ServiceAccount", "User", "Group"')
        if not subject.get("name"):
            raise invalid(rtype, name, f"{where}.name", "FieldValueRequired", "Required value")
        if kind == "ServiceAccount" and rtype.plural == "clusterrolebindings" and not subject.get("namespace"):
            raise invalid(rtype, name, f"{where}.namespace", "FieldValueRequired", "Required value")


def validate_update(rtype: ResourceType, old: dict, new: dict) -> None:
    if rtype.plural in ("rolebindings", "clusterrolebindings") and old.get("roleRef") != new.get("roleRef"):
        raise invalid(rtype, new["metadata"]["name"], "roleRef", "FieldValueInvalid",
                      f"Invalid value: {_go_ref(new.get('roleRef') or {})}: cannot change roleRef")


def _go_ref(ref: dict) -> str:
    return (f'rbac.RoleRef{{APIGroup:"{ref.get("apiGroup", "")}", Kind:"{ref.get("kind", "")}", '
            f'Name:"{ref.get("name", "")}"}}')
