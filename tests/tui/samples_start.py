"""Start screen samples: preflight checks with a pass and a fix, and a deployment to resume."""

from __future__ import annotations

from rltui.plan.inventory import Resource
from rltui.session import Check, ConfigState

CHECKS = [
    Check("env.sh", True, "valid, in /home/user/rl-demo"),
    Check("gcloud auth", True, "engineer@example.com"),
    Check("Application Default Credentials", False, "no credentials found",
          "gcloud auth application-default login"),
    Check("xpk on PATH", False, "", "pip install xpk"),
    Check("kubectl on PATH", True, "/usr/bin/kubectl"),
    Check("APIs enabled", False, "lustre.googleapis.com, servicenetworking.googleapis.com",
          "the Provision screen enables them"),
    Check("quota: Spot B200 GPUs in us-east1", True, "64 of 64 available"),
]

RESOURCES = [
    Resource("GKE cluster", "ray-a4-gpu-spot", "running", True, detail="8 nodes"),
    Resource("VPC network", "ray-a4-gpu-spot-net-0", "present", True),
    Resource("VPC network", "ray-a4-gpu-spot-net-1", "absent", True),
    Resource("IP range", "google-managed-services-ray-a4-gpu-spot-net-0", "present", True,
             detail="10.128.0.0/20"),
    Resource("VPC peering", "servicenetworking on ray-a4-gpu-spot-net-0", "present", True),
    Resource("Lustre instance", "rl-demo-gpu-lustre", "active", True, detail="9000 GiB"),
    Resource("RayCluster", "ray-a4-gpu-spot", "ready", True, detail="1 head, 8 workers ready"),
    Resource("PersistentVolumeClaim", "rl-demo-gpu-lustre-pvc", "bound", True),
    Resource("Lustre instance", "old-demo-lustre", "active", True, leak=True,
             detail="us-east1-b"),
]

NOTHING = [Resource("GKE cluster", "ray-a4-gpu-spot", "absent", True),
           Resource("Lustre instance", "rl-demo-gpu-lustre", "absent", True),
           Resource("RayCluster", "ray-a4-gpu-spot", "absent", True)]

CONFIG = ConfigState("/home/user/rl-demo/env.sh", {"PROJECT_ID": "team-rl-sandbox-42"}, {}, (),
                     {"HF_TOKEN": True, "WANDB_API_KEY": False})
