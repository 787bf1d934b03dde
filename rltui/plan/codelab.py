"""What the codelab fixes for every project: the four APIs it enables (step 1, `gcloud services
enable`). The plan, the preflight and the equivalent script all read them here."""

from __future__ import annotations

APIS = ("container.googleapis.com", "lustre.googleapis.com", "compute.googleapis.com",
        "servicenetworking.googleapis.com")
