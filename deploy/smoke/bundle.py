"""Writes a runc bundle's config.json from the one umoci generated for the image, the way a
Kubernetes pod would run the container (deploy/sidecar/deployment.yaml):

  bundle.py <umoci config.json> <out dir> <rootfs> <netns path> [--env K=V]... [--bind SRC:DST[:ro]]...
            [--memory BYTES] [--cgroup PATH] [--] [ARGS...]

Read-only root filesystem, /tmp a tmpfs, no capabilities, no new privileges, the pod's network
namespace joined by path. rlimits are dropped: this machine refuses the runtime's setrlimit calls.
ARGS, when given, replace the process's whole command line (the caller passes the image's
ENTRYPOINT first, as a pod spec's `args:` keep it)."""

import json
import os
import sys


def main(argv):
    src, out, rootfs, netns, *rest = argv
    env, binds, memory, cgroup, args = [], [], None, None, None
    i = 0
    while i < len(rest):
        flag = rest[i]
        if flag == "--":
            args = rest[i + 1:]
            break
        value = rest[i + 1]
        if flag == "--env":
            env.append(value)
        elif flag == "--bind":
            binds.append(value)
        elif flag == "--memory":
            memory = int(value)
        elif flag == "--cgroup":
            cgroup = value
        else:
            sys.exit(f"bundle.py: unknown flag {flag}")
        i += 2

    with open(src, encoding="utf-8") as f:
        spec = json.load(f)
    process = spec["process"]
    process.pop("rlimits", None)
    process["terminal"] = False
    process["noNewPrivileges"] = True
    process["capabilities"] = {k: [] for k in ("bounding", "effective", "inheritable", "permitted", "ambient")}
    if args is not None:
        process["args"] = args
    names = {e.split("=", 1)[0] for e in env}
    process["env"] = [e for e in process["env"] if e.split("=", 1)[0] not in names] + env

    spec["root"] = {"path": os.path.abspath(rootfs), "readonly": True}
    # umoci makes each image VOLUME a tmpfs; a bind given for it replaces it, as a pod's volume.
    replaced = {"/tmp"} | {b.split(":")[1] for b in binds}
    mounts = [m for m in spec["mounts"] if m["destination"] not in replaced]
    mounts.append({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
                   "options": ["nosuid", "nodev", "mode=1777", "size=65536k"]})
    for b in binds:
        parts = b.split(":")
        options = ["rbind", "nosuid", "nodev"] + (["ro"] if parts[2:] == ["ro"] else ["rw"])
        mounts.append({"destination": parts[1], "type": "bind", "source": os.path.abspath(parts[0]),
                       "options": options})
    spec["mounts"] = mounts

    linux = spec.setdefault("linux", {})
    namespaces = [n for n in linux.get("namespaces", []) if n["type"] not in ("network", "user")]
    namespaces.append({"type": "network", "path": netns})
    linux["namespaces"] = namespaces
    linux.pop("uidMappings", None)
    linux.pop("gidMappings", None)
    resources = linux.setdefault("resources", {})
    if memory is not None:
        # memory.limit_in_bytes (cgroup v1) / memory.max (v2); swap capped at the same value.
        resources["memory"] = {"limit": memory, "swap": memory}
    if cgroup is not None:
        linux["cgroupsPath"] = cgroup

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w", encoding="utf-8") as f:
        json.dump(spec, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
