"""google.cloud.billing.v1.CloudCatalog: the public price list, as the official client reads it.

Shapes (google-cloud-billing 1.21.0, google/cloud/billing_v1/types/cloud_catalog.py docstrings;
the REST reference cloud.google.com/billing/reference/rest/v1/services.skus/list):
- ListServices(page_size default 5000, page_token) -> services {name "services/<id>",
  service_id, display_name, business_entity_name "businessEntities/GCP"}.
- ListSkus(parent "services/<id>", currency_code default USD, page_size default 5000) -> skus
  {name "services/<id>/skus/<sku id>", sku_id, description, category {service_display_name,
  resource_family, resource_group, usage_type}, service_regions, pricing_info [{effective_time,
  summary, pricing_expression {usage_unit, usage_unit_description, base_unit,
  base_unit_description, base_unit_conversion_factor, display_quantity, tiered_rates
  [{start_usage_amount, unit_price Money}]}, currency_conversion_rate}], service_provider_name
  "Google", geo_taxonomy}. A time range is not served: the current prices only.
- No project is named, so no API gate applies here (the real API wants an API key or
  credentials; which project's quota it charges is not modelled).

Where each SKU and number comes from (rltui/cost.py's docstring has the full citations):
- Compute Engine is services/6F81-5844-456A; Kubernetes Engine services/CCD8-9BF1-090E (public
  catalog fixtures). The Managed Lustre service id, display name, SKU ids and descriptions are
  INVENTED (no public catalog response found).
- "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas" 4.9542 USD/h, usage_type
  "OnDemand" as the live SKU has it, and "A4 Nvidia B200 (1 gpu slice) running in Americas"
  16.11 USD/h (dstackai/gpuhunt, sparecores/sc-crawler test data for us-central1). The SKU ids
  3000-4751-0A45 / 816D-DB2C-4A30 are from a public catalog review. Their service_regions here
  are the Americas regions that offer A4; that us-east1 is among them is assumed.
- "E2 Instance Core running in Americas" (CF4E-A0C7-E3BF) 0.02181159 USD per vCPU-hour (a public
  catalog fixture, us-central1); "E2 Instance Ram running in Americas" 0.00292353 USD per
  GiB-hour: the commonly quoted us-central1 rate, not from a response (its SKU id is invented).
- "Regional Kubernetes Clusters" (B561-BFBD-1264) and "Zonal Kubernetes Clusters"
  (6B92-A835-08AB), global, 0.10 USD per cluster-hour (a public catalog fixture; infracost).
- Managed Lustre capacity by tier: INVENTED sandbox prices, served per GiB-month ("GiBy.mo",
  base unit "By.s", base_unit_conversion_factor 2^30 x 2,678,400 = 2.8759101014016e15) as the
  catalog's storage SKUs are (Compute Engine's "Storage PD Capacity" SKUs in public catalog
  responses have exactly that unit, base unit and factor); the month prices are the per GiB-hour
  figures 1000: 0.000822, 500: 0.000556, 250: 0.000411, 125: 0.000288 USD times the 744 hours
  that factor makes a month, so a reader that ignores the unit is off by 744x.
- Cloud NAT, of the service "Networking" (services/E505-1604-58F8, as public catalog listings
  give it): "Networking Cloud Nat Gateway Uptime" (32E2-4EFC-EF9F) 0.0014 USD per VM-hour,
  "Networking Cloud NAT IP Usage" (8515-9425-D2CE) 0.005 USD per IP-hour and "Networking Cloud
  Nat Data Processing" (015F-5732-FFF0) 0.045 USD per GiB, all global. The prices are Cloud NAT's
  pricing page's (cloud.google.com/nat/pricing, Public NAT); the descriptions and SKU ids are as
  public listings quote cloud.google.com/skus/sku-groups/nat-gateway - not read from a catalog
  response here; the resource family/group/usage type given them are the sandbox's guess.
A few neighbours that must NOT be picked (on-demand A4, zonal clusters, Spot E2, E2 in EMEA)
are served too, as the real catalog has them side by side.
"""

from __future__ import annotations

from datetime import datetime, timezone

import grpc
from google.cloud import billing_v1 as b

from rltui_sandbox.grpc_util import InvalidArgument, NotFound, add_service, page, parse_name

SERVICE = "google.cloud.billing.v1.CloudCatalog"
DEFAULT_PAGE = 5000

COMPUTE_ID = "6F81-5844-456A"
GKE_ID = "CCD8-9BF1-090E"
LUSTRE_ID = "5E1A-0C3D-7B2F"  # invented
NETWORKING_ID = "E505-1604-58F8"

SERVICES = [
    (COMPUTE_ID, "Compute Engine"),
    (GKE_ID, "Kubernetes Engine"),
    (LUSTRE_ID, "Managed Lustre"),  # display name not verified
    (NETWORKING_ID, "Networking"),
    ("95FF-2EF5-5EA1", "Cloud Storage"),
    ("24E6-581D-38E5", "BigQuery"),
]

# Regions of the "Americas" geography that list A4 (not verified per region), and EMEA's.
AMERICAS = ["us-central1", "us-east1", "us-east4", "us-east5", "us-south1", "us-west1", "us-west2",
            "us-west3", "us-west4", "northamerica-northeast1", "southamerica-east1"]
EMEA = ["europe-west1", "europe-west2", "europe-west3", "europe-west4", "europe-north1"]

# The hours of the catalog's "mo" (its storage SKUs' base_unit_conversion_factor / 3600 / 2^30).
MONTH_H = 744.0

# (service id, sku id, description, resource family, resource group, usage type, regions,
#  usage unit, unit description, price USD)
SKUS = [
    (COMPUTE_ID, "816D-DB2C-4A30", "Spot Preemptible A4 Nvidia B200 (1 gpu slice) running in Americas",
     "Compute", "GPU", "OnDemand", AMERICAS, "h", "hour", 4.9542),
    (COMPUTE_ID, "3000-4751-0A45", "A4 Nvidia B200 (1 gpu slice) running in Americas",
     "Compute", "GPU", "OnDemand", AMERICAS, "h", "hour", 16.11),
    (COMPUTE_ID, "CF4E-A0C7-E3BF", "E2 Instance Core running in Americas",
     "Compute", "CPU", "OnDemand", AMERICAS, "h", "hour", 0.02181159),
    (COMPUTE_ID, "F449-33EC-A5EF", "E2 Instance Ram running in Americas",
     "Compute", "RAM", "OnDemand", AMERICAS, "GiBy.h", "gibibyte hour", 0.00292353),
    (COMPUTE_ID, "2D4C-5A11-9E07", "Spot Preemptible E2 Instance Core running in Americas",
     "Compute", "CPU", "Preemptible", AMERICAS, "h", "hour", 0.00654),
    (COMPUTE_ID, "9876-1AB2-C3D4", "E2 Instance Core running in EMEA",
     "Compute", "CPU", "OnDemand", EMEA, "h", "hour", 0.02398),
    (GKE_ID, "B561-BFBD-1264", "Regional Kubernetes Clusters",
     "Compute", "Kubernetes", "OnDemand", ["global"], "h", "hour", 0.10),
    (GKE_ID, "6B92-A835-08AB", "Zonal Kubernetes Clusters",
     "Compute", "Kubernetes", "OnDemand", ["global"], "h", "hour", 0.10),
    (NETWORKING_ID, "32E2-4EFC-EF9F", "Networking Cloud Nat Gateway Uptime",
     "Network", "NAT", "OnDemand", ["global"], "h", "hour", 0.0014),
    (NETWORKING_ID, "8515-9425-D2CE", "Networking Cloud NAT IP Usage",
     "Network", "NAT", "OnDemand", ["global"], "h", "hour", 0.005),
    (NETWORKING_ID, "015F-5732-FFF0", "Networking Cloud Nat Data Processing",
     "Network", "NAT", "OnDemand", ["global"], "GiBy", "gibibyte", 0.045),
    *[(LUSTRE_ID, f"5E1A-{tier:04d}-CAP0", f"Managed Lustre {tier} MBps per TiB Capacity running in Americas",
       "Storage", "LustreCapacity", "OnDemand", AMERICAS, "GiBy.mo", "gibibyte month", round(hourly * MONTH_H, 9))
      for tier, hourly in ((1000, 0.000822), (500, 0.000556), (250, 0.000411), (125, 0.000288))],
]


# usage unit -> its base unit (the docstrings' example: "h" is 3600 "s"; GiBy.h in By.s).
_BASE_UNITS = {
    "h": {"base_unit": "s", "base_unit_description": "second", "base_unit_conversion_factor": 3600.0},
    "GiBy.h": {"base_unit": "By.s", "base_unit_description": "byte second",
               "base_unit_conversion_factor": 3600.0 * 2 ** 30},
    "GiBy": {"base_unit": "By", "base_unit_description": "byte", "base_unit_conversion_factor": 2.0 ** 30},
    "GiBy.mo": {"base_unit": "By.s", "base_unit_description": "byte second",
                "base_unit_conversion_factor": MONTH_H * 3600.0 * 2 ** 30},
}


def _money(price: float) -> dict:
    units = int(price)
    return {"currency_code": "USD", "units": units, "nanos": round((price - units) * 1e9)}


def _sku(row: tuple, now: datetime) -> b.Sku:
    service_id, sku_id, desc, family, group, usage, regions, unit, unit_desc, price = row
    display = dict(SERVICES)[service_id]
    geo = ({"type_": b.GeoTaxonomy.Type.GLOBAL} if regions == ["global"]
           else {"type_": b.GeoTaxonomy.Type.MULTI_REGIONAL, "regions": regions})
    return b.Sku(
        name=f"services/{service_id}/skus/{sku_id}", sku_id=sku_id, description=desc,
        category={"service_display_name": display, "resource_family": family, "resource_group": group,
                  "usage_type": usage},
        service_regions=regions, service_provider_name="Google", geo_taxonomy=geo,
        pricing_info=[{
            "effective_time": now, "summary": "", "currency_conversion_rate": 1.0,
            "pricing_expression": {
                "usage_unit": unit, "usage_unit_description": unit_desc, **_BASE_UNITS[unit],
                "display_quantity": 1.0,
                "tiered_rates": [{"start_usage_amount": 0.0, "unit_price": _money(price)}]},
        }])


def add_billing_service(server: grpc.aio.Server, world=None) -> None:
    """Register CloudCatalog (it needs no World: the catalog is the same for every project)."""

    def list_services(req: b.ListServicesRequest) -> b.ListServicesResponse:
        items = [b.Service(name=f"services/{sid}", service_id=sid, display_name=name,
                           business_entity_name="businessEntities/GCP") for sid, name in SERVICES]
        items, token = page(items, req.page_size or DEFAULT_PAGE, req.page_token)
        return b.ListServicesResponse(services=items, next_page_token=token)

    def list_skus(req: b.ListSkusRequest) -> b.ListSkusResponse:
        service_id = parse_name("services/{service}", req.parent, "parent")["service"]
        if service_id not in dict(SERVICES):
            raise NotFound(f"Service {req.parent} not found")  # the wording is the sandbox's
        if req.currency_code not in ("", "USD"):
            raise InvalidArgument(f"currency_code {req.currency_code!r}: the sandbox's catalog is in USD only")
        now = datetime.now(timezone.utc).replace(minute=0, second=0, microsecond=0)
        items = [_sku(row, now) for row in SKUS if row[0] == service_id]
        items, token = page(items, req.page_size or DEFAULT_PAGE, req.page_token)
        return b.ListSkusResponse(skus=items, next_page_token=token)

    add_service(server, SERVICE, {
        "ListServices": (list_services, b.ListServicesRequest, b.ListServicesResponse),
        "ListSkus": (list_skus, b.ListSkusRequest, b.ListSkusResponse),
    }, getattr(world, "faults", None))
