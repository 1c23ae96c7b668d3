"""deploy/offkv.yaml, without a cluster: it parses as YAML (python3-yaml),
holds a Deployment and a Service whose fields are where the Kubernetes API
expects them (no unknown key at the levels written by hand, so a typo such
as "livenesProbe" is caught), the Service and the Deployment select the
pods, the probes ask /health on the container's port, the grace period
covers preStop and offkv's drain, and the offkv program accepts the args
(`offkv serve ARGS --help` parses every flag and value first).

usage: deploy_check.py SOURCE_DIR [OFFKV_PROGRAM]"""
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("deploy_check: SKIP: no python3-yaml")
    sys.exit(77)

# offkv serve lets the answers go out for at most 10 s after SIGTERM
# (srv_stop in tools/offkv/serve/lifecycle.c).
DRAIN_S = 10

POD_KEYS = {"terminationGracePeriodSeconds", "containers", "volumes", "initContainers", "nodeSelector",
            "tolerations", "affinity", "securityContext", "serviceAccountName"}
CONTAINER_KEYS = {"name", "image", "command", "args", "ports", "startupProbe", "readinessProbe", "livenessProbe",
                  "lifecycle", "resources", "volumeMounts", "env", "securityContext", "imagePullPolicy"}
PROBE_KEYS = {"httpGet", "periodSeconds", "failureThreshold", "timeoutSeconds", "initialDelaySeconds",
              "successThreshold"}

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("deploy_check: FAIL:", what)


def main():
    src = sys.argv[1]
    path = src + "/deploy/offkv.yaml"
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    by_kind = {d.get("kind"): d for d in docs}
    check(set(by_kind) == {"Deployment", "Service"}, f"kinds {sorted(map(str, by_kind))}, want Deployment and Service")
    dep, svc = by_kind.get("Deployment"), by_kind.get("Service")
    if not dep or not svc:
        return
    check(dep.get("apiVersion") == "apps/v1" and svc.get("apiVersion") == "v1", "apiVersions apps/v1 and v1")
    for d in (dep, svc):
        check(bool(d.get("metadata", {}).get("name")), f"{d['kind']} has metadata.name")
    spec = dep["spec"]
    labels = spec["template"]["metadata"]["labels"]
    sel = spec["selector"]["matchLabels"]
    check(all(labels.get(k) == v for k, v in sel.items()), "the Deployment's selector matches its pods")
    check(all(labels.get(k) == v for k, v in svc["spec"]["selector"].items()), "the Service selects the pods")
    pod = spec["template"]["spec"]
    check(set(pod) <= POD_KEYS, f"unknown pod spec keys {sorted(set(pod) - POD_KEYS)}")
    (c,) = pod["containers"]
    check(set(c) <= CONTAINER_KEYS, f"unknown container keys {sorted(set(c) - CONTAINER_KEYS)}")
    args = [str(a) for a in c["args"]]
    check(args[:1] == ["serve"], "the container runs offkv serve")
    flag = lambda name: args[args.index(name) + 1] if name in args else None
    ports = {p.get("name"): p["containerPort"] for p in c["ports"]}
    check(flag("--port") is not None and int(flag("--port")) in ports.values(), "--port is the containerPort")
    check(flag("--host") == "0.0.0.0", "--host 0.0.0.0: reachable from outside the pod")
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        p = c.get(probe)
        check(p is not None, f"{probe} present")
        if p:
            check(set(p) <= PROBE_KEYS, f"{probe}: unknown keys {sorted(set(p) - PROBE_KEYS)}")
            g = p.get("httpGet", {})
            port = ports.get(g.get("port"), g.get("port"))
            check(g.get("path") == "/health" and port == int(flag("--port") or 0), f"{probe} asks /health on the port")
    target = svc["spec"]["ports"][0]["targetPort"]
    check(ports.get(target, target) == int(flag("--port") or 0), "the Service's targetPort is the server's port")
    pre = c.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    grace = pod.get("terminationGracePeriodSeconds", 30)
    check(grace >= pre + DRAIN_S + 5, f"terminationGracePeriodSeconds {grace} covers preStop {pre} s + drain {DRAIN_S} s")
    res = c.get("resources", {})
    check("cpu" in res.get("requests", {}) and "memory" in res.get("requests", {}), "cpu and memory requests")
    if len(sys.argv) > 2:
        r = subprocess.run([sys.argv[2]] + args + ["--help"], capture_output=True, text=True)
        check(r.returncode == 0, f"offkv {' '.join(args)} --help: exit {r.returncode}: {r.stderr.strip()}")


main()
if failures:
    sys.exit(1)
print("deploy_check: ok")
