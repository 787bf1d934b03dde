"""The sandbox's own certificate authority and the Kubernetes API's server certificate.

Made once per folder with `cryptography` (EC P-256: fast to generate), kept there (keys 0600):

- `ca.pem` / `ca.key`: a self-signed CA, the root of trust a GKE cluster returns as
  `master_auth.cluster_ca_certificate` (base64 of this PEM) and a kubeconfig carries as
  `certificate-authority-data`;
- `server.pem` / `server.key`: signed by that CA for 127.0.0.1 and localhost (SANs), served by
  the Kubernetes API's HTTPS site. Re-issued (same CA) when it nears its end;
- `googleapis.pem` / `googleapis.key`: signed by that CA for the `<api>.googleapis.com` names the
  sandbox's proxy terminates TLS for (googleapis_context, proxy.py), re-issued likewise.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from rltui.atomic import write_private

CA_DAYS = 3650
SERVER_DAYS = 398
RENEW_DAYS = 30


@dataclass(frozen=True)
class SandboxTLS:
    folder: Path

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def cert_file(self) -> Path:
        return self.folder / "server.pem"

    @property
    def key_file(self) -> Path:
        return self.folder / "server.key"

    @property
    def ca_pem(self) -> bytes:
        return self.ca_file.read_bytes()

    @property
    def ca_b64(self) -> str:
        """As GKE returns `master_auth.cluster_ca_certificate`: base64 of the PEM."""
        return base64.b64encode(self.ca_pem).decode()

    def server_context(self) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _name(cn: str):
    from cryptography.x509.oid import NameOID
    from cryptography import x509

    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "rltui sandbox"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _make_ca(folder: Path) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (x509.CertificateBuilder()
            .subject_name(_name("rltui sandbox CA")).issuer_name(_name("rltui sandbox CA"))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    write_private(folder / "ca.key", _pem_key(key))
    write_private(folder / "ca.pem", cert.public_bytes(serialization.Encoding.PEM))
    (folder / "ca.pem").chmod(0o644)  # a certificate: public


def _make_leaf(folder: Path, stem: str, cn: str, sans: list) -> None:
    """`<stem>.pem` / `<stem>.key`: a TLS server certificate for `sans`, signed by the CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID

    ca_key = serialization.load_pem_private_key((folder / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    cert = (x509.CertificateBuilder()
            .subject_name(_name(cn)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=SERVER_DAYS))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                         key_cert_sign=False, crl_sign=False, content_commitment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    write_private(folder / f"{stem}.key", _pem_key(key))
    write_private(folder / f"{stem}.pem", cert.public_bytes(serialization.Encoding.PEM))


def _make_server(folder: Path) -> None:
    from cryptography import x509

    _make_leaf(folder, "server", "kube-apiserver",
               [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])


def _ends_soon(path: Path, days: int) -> bool:
    from cryptography import x509

    try:
        cert = x509.load_pem_x509_certificate(path.read_bytes())
    except (FileNotFoundError, ValueError):
        return True
    return cert.not_valid_after_utc - _now() < dt.timedelta(days=days)


def ensure_tls(folder: Path) -> SandboxTLS:
    """The CA and server certificate in `folder`, made the first time (and renewed near expiry)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    made_ca = False
    if not (folder / "ca.key").exists() or _ends_soon(folder / "ca.pem", RENEW_DAYS):
        _make_ca(folder)
        made_ca = True
    if made_ca or not (folder / "server.key").exists() or _ends_soon(folder / "server.pem", RENEW_DAYS):
        _make_server(folder)
    return SandboxTLS(folder)


def _leaf_is_current(folder: Path, stem: str, names: set[str]) -> bool:
    """Made by this folder's CA, for exactly `names`, and not near its end."""
    from cryptography import x509
    from cryptography.exceptions import InvalidSignature

    try:
        cert = x509.load_pem_x509_certificate((folder / f"{stem}.pem").read_bytes())
        ca = x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes())
        cert.verify_directly_issued_by(ca)  # a remade CA orphans the old leaf
        sans = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
                   .value.get_values_for_type(x509.DNSName))
    except (FileNotFoundError, ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return False
    return sans == names and (folder / f"{stem}.key").exists() and \
        cert.not_valid_after_utc - _now() >= dt.timedelta(days=RENEW_DAYS)


def googleapis_context(folder: Path, hosts: list[str] | set[str]) -> ssl.SSLContext:
    """A server context for the proxy's intercepted `<api>.googleapis.com` names (proxy.py):
    `googleapis.pem` / `googleapis.key`, signed by the sandbox CA, one DNS SAN per host (an
    explicit list rather than `*.googleapis.com`: no client's wildcard rules to rely on). Made
    when missing, near its end, for other names, or from an older CA; call after ensure_tls."""
    folder, names = Path(folder), set(hosts)
    if not _leaf_is_current(folder, "googleapis", names):
        from cryptography import x509

        _make_leaf(folder, "googleapis", "googleapis.com (rltui sandbox)",
                   [x509.DNSName(n) for n in sorted(names)])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.set_alpn_protocols(["http/1.1"])  # the upstreams speak HTTP/1.1 only
    ctx.load_cert_chain(folder / "googleapis.pem", folder / "googleapis.key")
    return ctx
