"""Dagster's own floor for a code location of a given shape: what loading the same definitions
costs when Dagster alone builds them, with no delta-ops code in the process.

`shape_of(defs)` reads, untimed, the shape of the `Definitions` delta-ops built: every
multi-asset (its name, pool, op tags, retry policy, the resources it requires and every
output's key, dependencies, description, group, owners, kinds, tags), every external table
asset, every multi-asset check (its specs and their additional dependencies), every
configurable resource (its fields' names, types, defaults and descriptions, and the values
given: they are part of every job's run-config schema, a large share of the snapshot), the
jobs (names, descriptions, tags; the checks the asset job runs), schedule and sensor names.
`FLOOR_CHILD` is the program a fresh interpreter runs on that shape (as JSON): it imports Dagster only, builds the same
definitions with bodies that do nothing, resolves the repository and serializes its snapshot,
as a code server does. Its wall time is the floor that the delta-ops load is compared with.

    shape = shape_of(build_delta_maintenance_defs(warehouse, name="lake"))
    Path("shape.json").write_text(json.dumps(shape))
    subprocess.run([sys.executable, "-c", FLOOR_CHILD, "shape.json"])
"""

from __future__ import annotations

from typing import Any

import dagster as dg


def _key(key: dg.AssetKey) -> list[str]:
    return list(key.path)


def _spec(spec: dg.AssetSpec) -> dict[str, Any]:
    return {
        "key": _key(spec.key),
        "deps": [_key(dep.asset_key) for dep in spec.deps],
        "description": spec.description,
        "group": spec.group_name,
        "owners": list(spec.owners),
        "kinds": sorted(spec.kinds),
        "tags": dict(spec.tags),
        "skippable": spec.skippable,
    }


def _annotation(annotation: Any) -> str:
    """A field's type as text the floor evaluates again (`bool`, `dict[str, str]`, `str | None`)."""
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def _resource(resource: Any) -> dict[str, Any]:
    """A configurable resource's fields (name, type, default, description) and given values."""
    fields = []
    for name, info in type(resource).model_fields.items():
        required = info.is_required()
        fields.append(
            {
                "name": name,
                "annotation": _annotation(info.annotation),
                "required": required,
                "default": None if required else info.get_default(call_default_factory=True),
                "description": info.description,
            }
        )
    values = {f["name"]: getattr(resource, f["name"]) for f in fields}
    return {"fields": fields, "values": values}


def _retry(policy: dg.RetryPolicy | None) -> dict[str, Any] | None:
    if policy is None:
        return None
    backoff = policy.backoff.value if policy.backoff is not None else None
    return {"max_retries": policy.max_retries, "delay": policy.delay, "backoff": backoff}


def shape_of(defs: dg.Definitions) -> dict[str, Any]:
    """The shape of `defs` as plain JSON data (see the module's doc)."""
    assets: list[dict[str, Any]] = []
    external: list[dict[str, Any]] = []
    for item in defs.assets or ():
        if isinstance(item, dg.AssetSpec):
            external.append(_spec(item))
        elif isinstance(item, dg.AssetsDefinition):
            op = item.op
            assets.append(
                {
                    "name": item.node_def.name,
                    "pool": getattr(op, "pool", None),
                    "tags": dict(op.tags),
                    "retry": _retry(op.retry_policy),
                    "resources": sorted(item.required_resource_keys),
                    "specs": [_spec(s) for s in item.specs],
                }
            )
    checks = [
        {
            "name": c.node_def.name,
            "specs": [
                {
                    "name": s.name,
                    "asset": _key(s.asset_key),
                    "description": s.description,
                    "additional_deps": [_key(d.asset_key) for d in s.additional_deps],
                }
                for s in c.check_specs
            ],
        }
        for c in defs.asset_checks or ()
        if isinstance(c, dg.AssetChecksDefinition)
    ]
    jobs = [
        {"name": j.name, "description": j.description, "tags": dict(j.tags or {})}
        for j in defs.jobs or ()
    ]
    # the checks the asset job (the first) runs, by key, as the location names them
    asset_job = defs.resolve_job_def(jobs[0]["name"]) if jobs else None
    job_checks = (
        sorted(
            [_key(k.asset_key), k.name] for k in asset_job.asset_layer.asset_graph.asset_check_keys
        )
        if asset_job is not None
        else []
    )
    resources = {
        key: _resource(r)
        for key, r in (defs.resources or {}).items()
        if isinstance(r, dg.ConfigurableResource)
    }
    return {
        "assets": assets,
        "external": external,
        "checks": checks,
        "jobs": jobs,
        "job_checks": job_checks,
        "resources": resources,
        "schedules": [s.name for s in defs.schedules or ()],
        "sensors": [s.name for s in defs.sensors or ()],
    }


#: the fresh child: Dagster alone builds the definitions of a shape, resolves and snapshots them
FLOOR_CHILD = """
import json, sys, time
started = time.perf_counter()
import typing
import dagster as dg
import pydantic
from dagster._core.remote_representation.external_data import RepositorySnap
from dagster_shared.serdes import serialize_value
imported = time.perf_counter()
shape = json.load(open(sys.argv[1]))

def spec(s):
    return dg.AssetSpec(key=dg.AssetKey(s["key"]), deps=[dg.AssetKey(d) for d in s["deps"]],
        description=s["description"], group_name=s["group"], owners=s["owners"],
        kinds=set(s["kinds"]), tags=s["tags"], skippable=s["skippable"])

def retry(r):
    if r is None:
        return None
    backoff = dg.Backoff(r["backoff"]) if r["backoff"] is not None else None
    return dg.RetryPolicy(max_retries=r["max_retries"], delay=r["delay"], backoff=backoff)
def resource(key, r):
    names = {"typing": typing}
    body = {"__annotations__": {f["name"]: eval(f["annotation"], names) for f in r["fields"]}}
    for f in r["fields"]:
        body[f["name"]] = (pydantic.Field(description=f["description"]) if f["required"] else
                           pydantic.Field(default=f["default"], description=f["description"]))
    return type("Resource_" + key, (dg.ConfigurableResource,), body)(**r["values"])
def multi(a):
    @dg.multi_asset(name=a["name"], specs=[spec(s) for s in a["specs"]], can_subset=True,
                    pool=a["pool"], op_tags=a["tags"], retry_policy=retry(a["retry"]),
                    required_resource_keys=set(a["resources"]))
    def _body(context):
        return None
    return _body

def checks(c):
    specs = [dg.AssetCheckSpec(name=s["name"], asset=dg.AssetKey(s["asset"]),
             description=s["description"],
             additional_deps=[dg.AssetKey(d) for d in s["additional_deps"]]) for s in c["specs"]]
    @dg.multi_asset_check(name=c["name"], specs=specs, can_subset=True)
    def _body(context):
        return None
    return _body

assets = [multi(a) for a in shape["assets"]] + [spec(s) for s in shape["external"]]
asset_checks = [checks(c) for c in shape["checks"]]
keys = [dg.AssetKey(s["key"]) for a in shape["assets"] for s in a["specs"]]
first = shape["jobs"][0]
selection = dg.AssetSelection.assets(*keys)
if shape["job_checks"]:
    selection = selection | dg.AssetSelection.checks(
        *[dg.AssetCheckKey(dg.AssetKey(a), n) for a, n in shape["job_checks"]])
asset_job = dg.define_asset_job(first["name"], selection=selection,
                                description=first["description"], tags=first["tags"])

@dg.op
def _noop():
    return None

def op_job(j):
    @dg.job(name=j["name"], description=j["description"], tags=j["tags"])
    def _job():
        _noop()
    return _job

jobs = [asset_job] + [op_job(n) for n in shape["jobs"][1:]]
schedules = [dg.ScheduleDefinition(name=n, cron_schedule="0 3 * * *", job=asset_job)
             for n in shape["schedules"]]

def sensor(name):
    @dg.sensor(name=name, job=asset_job)
    def _sensor(context):
        return None
    return _sensor

resources = {key: resource(key, r) for key, r in shape["resources"].items()}
defs = dg.Definitions(assets=assets, asset_checks=asset_checks, jobs=jobs,
                      schedules=schedules, sensors=[sensor(n) for n in shape["sensors"]],
                      resources=resources)
"""

#: how both children end, once `defs` is built: resolve and snapshot the repository as a code
#: server does, and print what was built and how long each stage took
SERVE_TAIL = """
built = time.perf_counter()
repo = defs.get_repository_def()
repo.load_all_definitions()
resolved = time.perf_counter()
snapshot = serialize_value(RepositorySnap.from_def(repo))
done = time.perf_counter()
print(json.dumps({
    "assets": len(repo.assets_defs_by_key),
    "checks": len(repo.asset_checks_defs_by_key),
    "snapshot_mb": round(len(snapshot) / 1e6, 1),
    "stages": {"import": imported - started, "build": built - imported,
               "repository": resolved - built, "snapshot": done - resolved},
}))
"""

FLOOR_CHILD += SERVE_TAIL

__all__ = ["FLOOR_CHILD", "SERVE_TAIL", "shape_of"]
