#!/usr/bin/env bash
# Installs the Debian packages recond needs, only those that are missing.
# Called by `make deps` (and so by `make run` and `make test`); safe to run again.
set -eu
pkgs=(
  build-essential pkg-config clang libclang-rt-14-dev
  libmicrohttpd-dev libjansson-dev uuid-dev libsqlite3-dev libpq-dev postgresql-15
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd clinfo
  libcmocka-dev libfftw3-dev libxxhash-dev libcurl4-openssl-dev libsystemd-dev
  libnifti2-dev nettle-dev libpng-dev libxml2-dev
  libdcmtk-dev libarchive-dev orthanc orthanc-dicomweb dicom3tools python3-pydicom python3-numpy
  python3 python3-yaml python3-jsonschema curl jq
  openmpi-bin libopenmpi-dev
  chromium chromium-driver python3-selenium
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
