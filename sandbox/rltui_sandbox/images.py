"""Which local environment runs a container image the sandbox runs for real.

The sandbox's cluster runs the image's Ray, not rltui's: the Ray head of a head pod
(rayhead.py, via the environment's `ray`), a process container such as rltui's job supervisor
(kuberay/procpods.py, via its `python`) and the codelab's job (`uv run python ...`: the uv shim of
nemo_rl_tree.py is bound to its `python`). Two images run with one environment:
- nvcr.io/nvidia/nemo-rl:v0.4.0, whose NeMo-RL pins `ray[default]==2.46.0` (NVIDIA-NeMo/RL v0.4.0
  pyproject.toml line 27; uv.lock: ray 2.46.0, numpy 1.26.4);
- rayproject/ray:2.46.0, the job supervisor's image (rltui/manifests_supervisor.py): Ray 2.46.0.
The environment is a venv with what requirements-ray.txt names (`make ray-env` builds it at
.venv-ray beside the repository's .venv; RLTUI_SANDBOX_RAY_ENV names another). It is NOT the image:
its Python is the machine's (3.11; the nemo-rl image has 3.12, docker/Dockerfile PYTHON_VERSION),
and it holds only Ray, numpy and Ray's own dependencies, not NeMo-RL, torch or CUDA.

An image outside this table cannot run here; the kubelet then reports it as one it cannot pull
(kuberay/procpods.py). Images of containers the sandbox only pretends to run need nothing.
Standard library only: `rltui sandbox start` checks the environment before the daemon starts.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

RAY_VERSION = "2.46.0"
ENV_VAR = "RLTUI_SANDBOX_RAY_ENV"
INSTALL_COMMAND = "make ray-env"
REPO_ROOT = Path(__file__).resolve().parents[2]  # .../sandbox/rltui_sandbox/images.py
DEFAULT_DIR = REPO_ROOT / ".venv-ray"
REQUIREMENTS = REPO_ROOT / "requirements-ray.txt"
NEMO_RL_IMAGE = "nvcr.io/nvidia/nemo-rl:v0.4.0"
SUPERVISOR_IMAGE = f"rayproject/ray:{RAY_VERSION}"
# image -> the Ray version its environment must hold
IMAGES = {NEMO_RL_IMAGE: RAY_VERSION, SUPERVISOR_IMAGE: RAY_VERSION}
# Docker Hub's default registry and namespace, as the container runtime completes a short name
# (rayproject/ray:2.46.0 is docker.io/rayproject/ray:2.46.0; distribution/reference's
# ParseNormalizedNamed, which the kubelet's applyDefaultImageTag uses).
_DOCKER_HUB = re.compile(r"^(?:docker\.io|index\.docker\.io|registry-1\.docker\.io)/(?:library/)?")


class ImageUnavailable(RuntimeError):
    """No local environment runs this image (the kubelet reports it as an image pull failure)."""


class MissingRayEnv(ImageUnavailable):
    """The environment is not installed (or holds another Ray): `make ray-env` installs it."""


@dataclass(frozen=True)
class RayEnv:
    root: Path
    ray_version: str

    @property
    def python(self) -> Path:
        # Not resolved: bin/python of a venv is a symlink to the base interpreter, and only the
        # venv's path makes Python read its pyvenv.cfg (and so its site-packages).
        return self.root / "bin" / "python"

    @property
    def ray(self) -> Path:
        return self.root / "bin" / "ray"


def env_dir() -> Path:
    """Where the Ray environment is: RLTUI_SANDBOX_RAY_ENV, else .venv-ray in the repository."""
    explicit = os.environ.get(ENV_VAR, "").strip()
    return Path(explicit).expanduser().absolute() if explicit else DEFAULT_DIR


def installed_ray(root: Path) -> str | None:
    """The version of the Ray distribution installed in the venv at `root` (its dist-info name)."""
    for info in sorted(root.glob("lib/python*/site-packages/ray-*.dist-info")):
        return info.name[len("ray-"):-len(".dist-info")]
    return None


def install_hint() -> str:
    """How to make the environment: `make ray-env` in a checkout of rltui; installed from a wheel
    (no checkout around this file), a venv of one's own named by RLTUI_SANDBOX_RAY_ENV."""
    if REQUIREMENTS.is_file():
        return f"run `{INSTALL_COMMAND}`"
    return (f"make a venv with `pip install 'ray[default]=={RAY_VERSION}' numpy==1.26.4` and set {ENV_VAR} "
            "to its folder")


def ray_env(version: str = RAY_VERSION) -> RayEnv:
    """The environment holding Ray `version`; MissingRayEnv (one line, naming the command that
    installs it) when it is absent, incomplete or holds another Ray."""
    root = env_dir()
    where = f"{root} (from {ENV_VAR})" if os.environ.get(ENV_VAR, "").strip() else str(root)
    env = RayEnv(root, version)
    if not (env.python.exists() and env.ray.exists()):
        raise MissingRayEnv(f"the sandbox's Ray {version} environment (the Ray of {NEMO_RL_IMAGE}) is not "
                            f"installed at {where}: {install_hint()}")
    found = installed_ray(root)
    if found != version:
        holds = f"holds Ray {found}, not {version}" if found else f"has no Ray (it needs Ray {version})"
        raise MissingRayEnv(f"the sandbox's Ray environment at {where} {holds}: {install_hint()}")
    return env


def normalize(image: str) -> str:
    """The image reference without Docker Hub's implied registry and `library/` namespace."""
    return _DOCKER_HUB.sub("", image.strip())


def runs_here(image: str) -> bool:
    return normalize(image) in IMAGES


def for_image(image: str) -> RayEnv:
    """The environment that runs `image`; ImageUnavailable when the sandbox has none for it
    (MissingRayEnv when it has one that is not installed)."""
    version = IMAGES.get(normalize(image))
    if version is None:
        known = ", ".join(sorted(IMAGES))
        raise ImageUnavailable(f'rltui sandbox: no local environment runs image "{image}"; the sandbox runs '
                               f"{known} (Ray {RAY_VERSION})")
    return ray_env(version)


__all__ = ["DEFAULT_DIR", "ENV_VAR", "IMAGES", "INSTALL_COMMAND", "NEMO_RL_IMAGE", "RAY_VERSION", "REQUIREMENTS",
           "SUPERVISOR_IMAGE", "ImageUnavailable", "MissingRayEnv", "RayEnv", "env_dir", "for_image",
           "installed_ray", "normalize", "ray_env", "runs_here"]
