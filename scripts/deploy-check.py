#!/usr/bin/env python3
"""Checks what deploy/ ships, with the tools a platform team would use.

- hadolint lints every deploy/docker/*.Dockerfile (.hadolint.yaml);
- `kubectl kustomize` renders every overlay under deploy/kustomize/overlays;
- kubernetes-validate checks every rendered object, and the documents
  Tessera generates for tenants (deploy/generated, kept equal to what the
  server serves by its HTTP tests), against the schemas of the oldest
  Kubernetes with resource.k8s.io/v1 (1.34) and the newest it bundles, in
  strict mode (an unknown field is an error). Custom resources without a
  bundled schema must be listed in CUSTOM_KINDS;
- each overlay's server configuration (its ConfigMap plus the Deployment's
  environment, secrets mounted as files) loads in the real server binary
  (`tessera-server check-config`), with numeric stand-ins for the secrets.

Run by scripts/test.sh with the Python of the deploy-tools virtual
environment (scripts/lib.sh: ensure_deploy_tools) after the release build:
  deploy-check.py --tools DIR --server-bin PATH
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

import yaml
from kubernetes_validate import utils as kv

ROOT = pathlib.Path(__file__).resolve().parent.parent
KUBERNETES_VERSIONS = ["1.34.0", kv.latest_version()]
# Custom resources: no schema ships with kubernetes-validate.
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def fail(msg):
    print(f"deploy-check: {msg}", file=sys.stderr)
    sys.exit(1)


def validate(objects, where):
    for obj in objects:
        key = (obj.get("apiVersion"), obj.get("kind"))
        name = f"{where}: {key[1]}/{obj.get('metadata', {}).get('name')}"
        for version in KUBERNETES_VERSIONS:
            try:
                kv.validate(obj, version, strict=True)
            except kv.SchemaNotFoundError:
                if key not in CUSTOM_KINDS:
                    fail(f"{name}: no schema for {key} in Kubernetes {version}")
            except kv.ValidationError as e:
                fail(f"{name} is invalid for Kubernetes {version}: {e.message} at {'/'.join(map(str, e.path))}")


def server_config_loads(objects, overlay, server_bin):
    configs = [o for o in objects if o["kind"] == "ConfigMap" and "tessera.toml" in o.get("data", {})]
    deployments = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "tessera-server"]
    if len(configs) != 1 or len(deployments) != 1:
        fail(f"{overlay}: expected one server ConfigMap and one server Deployment")
    pod = deployments[0]["spec"]["template"]["spec"]
    container = next(c for c in pod["containers"] if c["name"] == "server")
    secret_mounts = {
        m["mountPath"]
        for m in container.get("volumeMounts", [])
        for v in pod.get("volumes", [])
        if v["name"] == m["name"] and "secret" in v
    }
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        (tmp / "tessera.toml").write_text(configs[0]["data"]["tessera.toml"])
        env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
        for i, var in enumerate(container.get("env", [])):
            value = var.get("value")
            if value is None:
                fail(f"{overlay}: {var['name']} is not a plain value; secrets are mounted files (*_FILE)")
            if var["name"].endswith("_FILE"):
                mount = next((m for m in secret_mounts if value.startswith(m + "/")), None)
                if mount is None:
                    fail(f"{overlay}: {var['name']} names {value}, which no Secret volume provides")
                stand_in = tmp / f"secret-{i}"
                # Numbers, as a generated secret may well be: they must stay strings.
                stand_in.write_text(
                    "postgres://tessera:1234@db.internal:5432/tessera\n" if "DATABASE" in var["name"] else "123456\n"
                )
                value = str(stand_in)
            env[var["name"]] = value
        args = [a.replace("/etc/tessera/tessera.toml", str(tmp / "tessera.toml")) for a in container.get("args", [])]
        out = subprocess.run([server_bin, *args, "check-config"], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            fail(f"{overlay}: the server refuses its configuration: {out.stderr.strip()}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tools", required=True, help="bin/ of the deploy-tools virtual environment")
    p.add_argument("--server-bin", required=True)
    a = p.parse_args()
    tools = pathlib.Path(a.tools)

    dockerfiles = sorted((ROOT / "deploy/docker").glob("*.Dockerfile"))
    if not dockerfiles:
        fail("no Dockerfiles under deploy/docker")
    subprocess.run([tools / "hadolint", "--config", ROOT / ".hadolint.yaml", *dockerfiles], check=True)

    overlays = sorted(d for d in (ROOT / "deploy/kustomize/overlays").iterdir() if d.is_dir())
    if not overlays:
        fail("no overlays under deploy/kustomize/overlays")
    for overlay in overlays:
        rendered = subprocess.run([tools / "kubectl", "kustomize", overlay], check=True, capture_output=True, text=True).stdout
        objects = [o for o in yaml.safe_load_all(rendered) if o]
        validate(objects, overlay.name)
        server_config_loads(objects, overlay.name, a.server_bin)
        print(f"deploy-check: {overlay.name}: {len(objects)} objects valid for Kubernetes {', '.join(KUBERNETES_VERSIONS)}; the server loads its configuration")

    generated = sorted((ROOT / "deploy/generated").glob("*.yaml"))
    if not generated:
        fail("no generated documents under deploy/generated")
    for doc in generated:
        validate([o for o in yaml.safe_load_all(doc.read_text()) if o], doc.name)
    print(f"deploy-check: {len(dockerfiles)} Dockerfiles lint clean; {len(generated)} generated documents valid")


if __name__ == "__main__":
    main()
