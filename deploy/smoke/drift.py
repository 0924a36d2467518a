"""The drift test: the image built here must be configured as the one users build.

  drift.py <Dockerfile> <image config.json> <base config.json> [--build-arg K=V]...

The configs are `buildah inspect --type image` output (Docker format, which keeps HEALTHCHECK).
The image's user, entrypoint, cmd, env, labels, volumes, ports, working directory and health check
must be exactly what the Dockerfile's runtime stage declares on top of what distroless
cc-debian12:nonroot declares; and the stand-in base must declare just that much of its own.
Exit 1 on the first field that differs."""

import json
import re
import shlex
import sys

# gcr.io/distroless/cc-debian12:nonroot's own config (GoogleContainerTools/distroless, base/base.bzl:
# the nonroot variants set user 65532 and workdir /home/nonroot; env PATH and SSL_CERT_FILE).
DISTROLESS = {
    "User": "65532",
    "WorkingDir": "/home/nonroot",
    "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
}
# Labels the build tool itself adds (docker build adds none).
TOOL_LABELS = {"io.buildah.version"}
DURATION = {"s": 10**9, "m": 60 * 10**9, "ms": 10**6}


def instructions(path):
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    lines, current = [], ""
    for raw in open(path, encoding="utf-8"):
        line = raw.rstrip("\n")
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        lines.append((current + line).strip())
        current = ""
    return [tuple(l.split(None, 1)) if " " in l else (l, "") for l in lines]


def runtime_stage(path, build_args):
    """What the last stage declares: the runtime image."""
    all_ins = instructions(path)
    last = max(i for i, (op, _) in enumerate(all_ins) if op.upper() == "FROM")
    args, declared = dict(build_args), {"Env": [], "Labels": {}}
    for op, rest in all_ins[last + 1:]:
        op = op.upper()
        sub = lambda s: re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), s)
        if op == "ARG":
            name, _, default = rest.partition("=")
            args.setdefault(name, default)
        elif op == "LABEL":
            for pair in shlex.split(rest):
                k, _, v = pair.partition("=")
                declared["Labels"][k] = sub(v)
        elif op == "ENV":
            declared["Env"] += [sub(p) for p in shlex.split(rest)]
        elif op == "USER":
            declared["User"] = rest
        elif op == "VOLUME":
            declared["Volumes"] = json.loads(rest)
        elif op == "EXPOSE":
            declared["ExposedPorts"] = [p if "/" in p else p + "/tcp" for p in rest.split()]
        elif op in ("ENTRYPOINT", "CMD"):
            declared[op.capitalize()] = json.loads(rest)
        elif op == "HEALTHCHECK":
            opts, _, cmd = rest.partition("CMD ")
            check = {"Test": ["CMD"] + json.loads(cmd)}
            for flag in shlex.split(opts):
                k, _, v = flag.lstrip("-").partition("=")
                key = {"interval": "Interval", "timeout": "Timeout", "start-period": "StartPeriod",
                       "retries": "Retries"}[k]
                if key == "Retries":
                    check[key] = int(v)
                else:
                    num, unit = re.fullmatch(r"(\d+)(ms|s|m)", v).groups()
                    check[key] = int(num) * DURATION[unit]
            declared["Healthcheck"] = check
    return declared


def compare(what, got, want):
    if got != want:
        print(f"FAIL: drift: {what}: the image has {got!r}, expected {want!r}")
        sys.exit(1)
    print(f"ok: {what} = {json.dumps(got, sort_keys=True)}")


def main(argv):
    dockerfile, image_path, base_path, *rest = argv
    build_args = dict(a.split("=", 1) for flag, a in zip(rest[::2], rest[1::2]) if flag == "--build-arg")
    image = json.load(open(image_path, encoding="utf-8"))["Docker"]["config"]
    base = json.load(open(base_path, encoding="utf-8"))["Docker"]["config"]
    declared = runtime_stage(dockerfile, build_args)

    compare("stand-in base: User", base.get("User"), DISTROLESS["User"])
    compare("stand-in base: WorkingDir", base.get("WorkingDir"), DISTROLESS["WorkingDir"])
    compare("stand-in base: Env", sorted(base.get("Env") or []), sorted(DISTROLESS["Env"]))
    compare("stand-in base: no Entrypoint, Cmd or Volumes",
            [base.get("Entrypoint"), base.get("Cmd"), base.get("Volumes")], [None, None, None])

    compare("User", image.get("User"), declared["User"])
    compare("Entrypoint", image.get("Entrypoint"), declared["Entrypoint"])
    compare("Cmd", image.get("Cmd"), declared["Cmd"])
    compare("WorkingDir", image.get("WorkingDir"), DISTROLESS["WorkingDir"])
    env = {e.split("=", 1)[0]: e for e in DISTROLESS["Env"] + declared["Env"]}
    compare("Env", sorted(image.get("Env") or []), sorted(env.values()))
    labels = {k: v for k, v in (image.get("Labels") or {}).items() if k not in TOOL_LABELS}
    compare("Labels", labels, declared["Labels"])
    compare("Volumes", sorted(image.get("Volumes") or {}), sorted(declared["Volumes"]))
    compare("ExposedPorts", sorted(image.get("ExposedPorts") or {}), sorted(declared["ExposedPorts"]))
    hc = image.get("Healthcheck") or {}
    compare("Healthcheck", {k: hc.get(k) for k in declared["Healthcheck"]}, declared["Healthcheck"])


if __name__ == "__main__":
    main(sys.argv[1:])
