"""The tokens the job's driver finds, looked for as NeMo-RL v0.4.0's libraries look for them,
and reported as fingerprints (the first 12 hex of their sha256), never as values.

- Hugging Face: huggingface_hub 0.34.4 (NeMo-RL v0.4.0's uv.lock), utils/_auth.py get_token():
  HF_TOKEN, then HUGGING_FACE_HUB_TOKEN, then the file HF_TOKEN_PATH (constants.py; default
  $HF_HOME/token, HF_HOME defaulting to $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface),
  cleaned of CR, LF and surrounding blanks (_clean_token). Colab's secret store is left out.
- W&B: wandb 0.21.1, sdk/lib/apikey.py api_key(): WANDB_API_KEY, else the netrc file
  (get_netrc_file_path: NETRC, else ~/.netrc or ~/_netrc) entry for the host of the base URL
  (WANDB_BASE_URL, default https://api.wandb.ai), read by requests.utils.get_netrc_auth; the
  password is the key. Without one, wandb.init in a job (no tty) raises
  UsageError("api_key not configured (no-tty). call wandb.login(key=[your_api_key])")
  (sdk/wandb_login.py prompt_api_key). NeMo-RL calls wandb.init when logger.wandb_enabled
  (nemo_rl/utils/logger.py WandbLogger).
- The driver's environment: NeMo-RL's init_ray passes all of os.environ as the job's runtime
  env (nemo_rl/distributed/virtual_cluster.py), and RayWorkerGroup copies it into each worker's
  (worker_groups.py), where Ray's API shows it. The demo names (never shows) the variables
  that would carry a token there.
"""

from __future__ import annotations

import hashlib
import netrc
import os
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

from .config import ConfigError
from .report import out

TOKEN_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY")
WANDB_NO_KEY = ("wandb.errors.errors.UsageError: api_key not configured (no-tty)."
                " call wandb.login(key=[your_api_key])")


def fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:12]


def _clean(token: str | None) -> str | None:
    if token is None:
        return None
    return token.replace("\r", "").replace("\n", "").strip() or None


def hf_token(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """(the token, where it came from), as huggingface_hub's get_token finds it."""
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        if environ.get(name):
            return _clean(environ[name]), f"env {name}"
    cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    home = environ.get("HF_HOME") or os.path.join(cache, "huggingface")
    path = os.path.expanduser(environ.get("HF_TOKEN_PATH") or os.path.join(home, "token"))
    try:
        return _clean(Path(path).read_text()), "the file HF_TOKEN_PATH" if environ.get("HF_TOKEN_PATH") else path
    except FileNotFoundError:
        return None, ""


def wandb_api_key(environ: Mapping[str, str]) -> tuple[str | None, str]:
    """(the key, where it came from), as wandb's api_key finds it."""
    if environ.get("WANDB_API_KEY"):
        return environ["WANDB_API_KEY"], "env WANDB_API_KEY"
    if environ.get("NETRC"):
        paths = [os.path.expanduser(environ["NETRC"])]
    else:
        paths = [os.path.join(os.path.expanduser("~"), name) for name in (".netrc", "_netrc")]
    path = next((p for p in paths if os.path.exists(p)), None)
    host = urlparse(environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname
    if path is None or host is None:
        return None, ""
    try:
        found = netrc.netrc(path).authenticators(host)
    except (netrc.NetrcParseError, OSError):
        return None, ""
    key = found[2] if found else None
    return (key or None), ("the netrc file NETRC" if environ.get("NETRC") else path)


def check(config: dict, environ: Mapping[str, str]) -> None:
    """Print what the driver found and what init_ray would hand to Ray; ConfigError when W&B is
    on without a key (wandb.init's error)."""
    hf, hf_from = hf_token(environ)
    out(f"rltui sandbox: Hugging Face token sha256:{fingerprint(hf)} from {hf_from}" if hf
        else "rltui sandbox: no Hugging Face token (public models only)")
    found = [v for v in (hf,) if v]
    if (config.get("logger") or {}).get("wandb_enabled"):
        key, key_from = wandb_api_key(environ)
        if not key:
            raise ConfigError(WANDB_NO_KEY)
        out(f"rltui sandbox: W&B API key sha256:{fingerprint(key)} from {key_from}")
        found.append(key)
    exposed = sorted(name for name, value in environ.items()
                     if name in TOKEN_VARS or any(token in value for token in found))
    out(f"rltui sandbox: NeMo-RL's init_ray hands this driver's environment ({len(environ)} variables) to"
        f" Ray as the job's runtime env; variables with a token: {', '.join(exposed) or 'none'}")
