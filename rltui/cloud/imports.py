"""The client libraries, loaded only as far as rltui uses them.

Python runs a package's `__init__` before any of its submodules, and three packages rltui
needs import far more there than rltui calls:
- `google.cloud.compute_v1` imports every one of its ~100 services' clients to re-export them:
  most of its import time, for the ten services rltui calls;
- `kubernetes` imports the whole synchronous client (config, dynamic, watch, stream, utils,
  leaderelection, informer), and `kubernetes.aio` its own config, dynamic, stream and watch,
  none of which rltui uses: it builds its Configuration from the GKE cluster and reads the
  JSON itself (kube.py). The figures: docs/decisions/import-cost.md.
So such a package goes into `sys.modules` as its spec makes it (its `__path__`, its `__init__`
not run), and the submodules rltui needs are imported through it. The libraries' code runs
unchanged; only the re-exports are deferred: the first name asked of the package that is not a
submodule (`compute_v1.NetworksClient`, `kubernetes.__version__`, anywhere in the process)
runs the real `__init__` then, as a plain import would have. PEP 562's module `__getattr__` is
the hook; a package already imported is used as it is.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
import sys
import threading
from types import ModuleType
from typing import Any

COMPUTE = "google.cloud.compute_v1"
# One import at a time: compute clients are built in worker threads, and two threads importing
# services that share `types.compute` can meet in Python's per-module import locks, whose
# deadlock avoidance then hands one of them a partly initialised module.
_lock = threading.RLock()


def deferred(name: str) -> ModuleType:
    """The package `name`, without running its `__init__` until a name it re-exports is asked."""
    with _lock:
        found = sys.modules.get(name)
        if found is not None:
            return found
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or spec.submodule_search_locations is None:
            raise ImportError(f"{name} is not an installed package", name=name)
        module = importlib.util.module_from_spec(spec)
        loader = spec.loader
        submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}

        def whole(attr: str) -> Any:
            if attr in submodules:   # `package.submodule`, `from package import submodule`
                return importlib.import_module(f"{name}.{attr}")
            with _lock:   # another thread asking meanwhile waits for the names
                if module.__dict__.get("__getattr__") is whole:
                    # The hook stays while __init__ runs and after it failed (ctrl+c in its
                    # second of imports): the next name asked runs it again, as a plain
                    # import retried would.
                    loader.exec_module(module)
                    if module.__dict__.get("__getattr__") is whole:
                        del module.__dict__["__getattr__"]
            if attr in module.__dict__:
                return module.__dict__[attr]
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")

        module.__dict__["__getattr__"] = whole
        sys.modules[name] = module
        return module


def compute_types() -> ModuleType:
    """`google.cloud.compute_v1.types.compute`: every message (Firewall, Address, Operation, ...)."""
    with _lock:
        deferred(COMPUTE)
        return importlib.import_module(f"{COMPUTE}.types.compute")


def compute_client(kind: str) -> Any:
    """The client class of one Compute service by its name in the package: "GlobalAddresses"
    gives `services.global_addresses.GlobalAddressesClient`."""
    service = re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()
    with _lock:
        deferred(COMPUTE)
        module = importlib.import_module(f"{COMPUTE}.services.{service}")
    return getattr(module, f"{kind}Client")


def kube_client() -> ModuleType:
    """`kubernetes.aio.client` (ApiClient, Configuration, exceptions), without the rest of
    `kubernetes` and `kubernetes.aio`."""
    with _lock:
        deferred("kubernetes")
        deferred("kubernetes.aio")
        return importlib.import_module("kubernetes.aio.client")


def kube_api_exception() -> Any:
    """`kubernetes.aio.client.exceptions.ApiException`."""
    kube_client()
    return importlib.import_module("kubernetes.aio.client.exceptions").ApiException
