#!/bin/sh
# The microvm tier's guest kernel (docs/tiers.md): Debian's linux-image
# package, downloaded and unpacked (never installed as the host's kernel,
# with its hooks), of which Airlock keeps the kernel and the few modules its
# guest loads, in dependency order.
#   guest-kernel.sh DIR     (as root; DIR is PREFIX/share/airlock/vm)
set -eu
dir=${1:?usage: guest-kernel.sh DIR}
if [ -r "$dir/vmlinuz" ] && [ -r "$dir/modules/order" ]; then
	exit 0
fi
# The versioned package linux-image-amd64 points at.
pkg=$(apt-cache depends linux-image-amd64 | sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n1)
[ -n "$pkg" ] || { echo "guest-kernel.sh: no linux-image package found (apt-get update?)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download "$pkg" >/dev/null 2>&1) || { echo "guest-kernel.sh: downloading $pkg failed" >&2; exit 1; }
dpkg-deb -x "$tmp"/*.deb "$tmp/x"
mods=$(echo "$tmp"/x/lib/modules/*/kernel)
# virtio over MMIO (QEMU's microvm machine), its console ports, 9p.
order="drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_mmio
drivers/char/virtio_console fs/netfs/netfs fs/fscache/fscache net/9p/9pnet
net/9p/9pnet_virtio fs/9p/9p"
mkdir -p "$tmp/out/modules"
: > "$tmp/out/modules/order"
for m in $order; do
	f="$mods/$m.ko"
	if [ ! -e "$f" ] && [ -e "$f.xz" ]; then xz -dc "$f.xz" > "$tmp/out/modules/$(basename "$m").ko"
	else cp "$f" "$tmp/out/modules/"; fi
	echo "$(basename "$m").ko" >> "$tmp/out/modules/order"
done
cp "$tmp"/x/boot/vmlinuz-* "$tmp/out/vmlinuz"
echo "$pkg" > "$tmp/out/package"
mkdir -p "$dir"
rm -rf "$dir.new"
cp -r "$tmp/out" "$dir.new"
chmod -R a+rX "$dir.new"
rm -rf "$dir"
mv "$dir.new" "$dir"
echo "guest kernel: $pkg in $dir"
