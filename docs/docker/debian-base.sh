#!/bin/sh
# Make a Debian bookworm base image without a registry: debootstrap from a Debian mirror, then
# `docker import`. For machines that reach a Debian mirror but not Docker Hub; build on it with
#   docker build --build-arg BASE_IMAGE=mcp-inspector-base:bookworm .
#
#   docs/docker/debian-base.sh [TAG]        (as root; TAG defaults to mcp-inspector-base:bookworm)
#
# Settings: DEBIAN_MIRROR (http://deb.debian.org/debian), DEBIAN_SECURITY_MIRROR (the mirror's
# debian-security beside it), DOCKER (docker). The host's own added
# certificate authorities (/usr/local/share/ca-certificates) go into the image, so that a build
# behind a TLS-inspecting proxy trusts it; the Dockerfile installs ca-certificates, which adds them.
set -eu

tag="${1:-mcp-inspector-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
docker="${DOCKER:-docker}"

[ "$(id -u)" = 0 ] || { echo "debian-base.sh: debootstrap needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "debian-base.sh: install debootstrap (apt-get install debootstrap)" >&2; exit 1; }

rootfs="$(mktemp -d /tmp/mcp-inspector-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT

debootstrap --variant=minbase bookworm "$rootfs" "$mirror"

# Security and point-release updates, as the registry's debian:bookworm-slim has them.
security="${DEBIAN_SECURITY_MIRROR:-$(echo "$mirror" | sed 's#/debian$#/debian-security#')}"
cat > "$rootfs/etc/apt/sources.list" <<SOURCES
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb $security bookworm-security main
SOURCES

if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    mkdir -p "$rootfs/usr/local/share/ca-certificates"
    cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
fi

# As the registry's slim images: packages installed later leave out their documentation too.
cat > "$rootfs/etc/dpkg/dpkg.cfg.d/slim" <<EXCLUDES
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EXCLUDES
find "$rootfs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/*
find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +

# What an image need not carry: apt's package lists and caches, logs.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/log/*.log

tar --numeric-owner -C "$rootfs" -c . | "$docker" import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    - "$tag"
echo "debian-base.sh: $tag"
