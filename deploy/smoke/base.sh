#!/usr/bin/env bash
# Assembles the stand-in for gcr.io/distroless/cc-debian12:nonroot, which cannot be pulled here,
# from this machine's Debian 12 packages, and commits it as an image:
#   deploy/smoke/base.sh <buildah args...> <image name>
# What distroless declares for that image (GoogleContainerTools/distroless, base/base.bzl and
# cc/): glibc (libc6), libgcc-s1 and libstdc++6, /etc/passwd and /etc/group with root, nobody and
# nonroot (65532), /etc/nsswitch.conf, /etc/os-release, the CA bundle, /tmp (1777), a usr-merged
# layout, no shell; config User 65532, WorkingDir /home/nonroot, Env PATH and SSL_CERT_FILE.
# Not copied: tzdata, netbase, libssl3/openssl (base-debian12 has them; the binary uses none).
set -euo pipefail
shopt -s inherit_errexit 2>/dev/null || true
name="${*: -1}"
buildah=(buildah "${@:1:$#-1}")

rootfs="$(mktemp -d)"
trap 'rm -rf "${rootfs}"' EXIT
chmod 0755 "${rootfs}"
mkdir -p "${rootfs}"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc/ssl/certs,home/nonroot,root,var/lib}
for d in bin sbin lib lib64; do ln -s "usr/${d}" "${rootfs}/${d}"; done
install -d -m 1777 "${rootfs}/tmp"
chown 65532:65532 "${rootfs}/home/nonroot"
chmod 0700 "${rootfs}/root"

# The packages' own files (libraries, loader, gconv, ld.so.conf.d), docs and locales left out.
packages=(libc6 libgcc-s1 libstdc++6)
for p in "${packages[@]}"; do dpkg-query -W "${p}" >/dev/null || { echo "missing package ${p}" >&2; exit 1; }; done
dpkg-query -L "${packages[@]}" | grep -vE '^/usr/share/(doc|lintian|locale|gcc|gdb)(/|$)' | sort -u \
  | while read -r f; do if [[ -f "${f}" || -L "${f}" ]]; then printf '%s\n' "${f#/}"; fi; done \
  | tar -C / --no-recursion -cf - -T - | tar -C "${rootfs}" --keep-directory-symlink -xf -

cat > "${rootfs}/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin
PASSWD
cat > "${rootfs}/etc/group" <<'GROUP'
root:x:0:
nobody:x:65534:
tty:x:5:
staff:x:50:
nonroot:x:65532:
GROUP
printf 'passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n' > "${rootfs}/etc/nsswitch.conf"
cp /etc/os-release "${rootfs}/etc/os-release"
if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
  cp /etc/ssl/certs/ca-certificates.crt "${rootfs}/etc/ssl/certs/ca-certificates.crt"
fi

ctr="$("${buildah[@]}" from --quiet scratch)"
# Mounted and copied with cp -a: `buildah copy` would make every file root's, /home/nonroot too.
mnt="$("${buildah[@]}" mount "${ctr}")"
cp -a "${rootfs}/." "${mnt}/"
"${buildah[@]}" umount "${ctr}" >/dev/null
"${buildah[@]}" config \
  --user 65532 \
  --workingdir /home/nonroot \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  "${ctr}"
"${buildah[@]}" commit --quiet --format docker --rm "${ctr}" "${name}" >/dev/null
