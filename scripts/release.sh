#!/usr/bin/env bash
# Builds a release of Airlock into dist/ (docs/operations.md, "Releases"):
#
#   - airlock for linux, darwin and windows on amd64 and arm64: static
#     (CGO_ENABLED=0), -trimpath, stamped with the version, the commit and
#     the commit's date (`airlock version` prints them), each in an archive
#     with LICENSE and README.md (.tar.gz; .zip for Windows);
#   - the TypeScript SDK's npm tarball and the Python SDK's sdist and wheel;
#   - an SBOM of the binary's modules (CycloneDX JSON, cyclonedx-gomod);
#   - with --image, the container image of each Linux binary (Containerfile,
#     built with buildah) as an OCI archive;
#   - SHA256SUMS over all of them.
#
# The version is the one in VERSION, the one place it is written: the SDKs'
# package.json, pyproject.toml and __version__ must say the same, or the
# release stops. A release (no --snapshot) also needs a clean work tree
# whose HEAD is tagged v<VERSION> and a CHANGELOG.md section for it.
#
# Usage: scripts/release.sh [--snapshot] [--targets "linux/amd64 …"] [--no-sdks] [--image]
#        scripts/release.sh [--snapshot] --ldflags
#
#   --snapshot  a build of any commit, for CI: version <VERSION>-SNAPSHOT-<commit>
#   --targets   only these GOOS/GOARCH pairs (default: all six)
#   --no-sdks   leave the SDK packages out
#   --image     build the container image too (needs buildah)
#   --ldflags   print the -ldflags a build would use, and stop
#
# No GoReleaser: see docs/dependencies.md, "Tools the release uses".
set -euo pipefail
cd "$(dirname "$0")/.."

CYCLONEDX_GOMOD_VERSION=v1.10.0
ALL_TARGETS="linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64"

snapshot=false
targets=$ALL_TARGETS
sdks=true
print_ldflags=false
image=false
while [ $# -gt 0 ]; do
  case "$1" in
    --snapshot) snapshot=true ;;
    --targets) [ $# -ge 2 ] || { echo "release: --targets needs a list" >&2; exit 2; }; targets=$2; shift ;;
    --no-sdks) sdks=false ;;
    --ldflags) print_ldflags=true ;;
    --image) image=true ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "release: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "release: $*" >&2; exit 1; }

base=$(tr -d '[:space:]' < VERSION)
[[ $base =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "VERSION says '$base', not MAJOR.MINOR.PATCH"
commit=$(git rev-parse HEAD)
# The commit's date, not the clock's: two builds of one commit are the same.
date=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
epoch=$(git log -1 --format=%ct HEAD)
if $snapshot; then
  version="$base-SNAPSHOT-${commit:0:12}"
else
  version=$base
fi
ldflags="-s -w -X main.version=$version -X main.commit=$commit -X main.date=$date"
if $print_ldflags; then
  echo "$ldflags"
  exit 0
fi

for target in $targets; do
  case " $ALL_TARGETS " in
    *" $target "*) ;;
    *) die "unknown target $target (one of: $ALL_TARGETS)" ;;
  esac
done

# The SDKs carry VERSION too.
npm_version=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' sdk/typescript/package.json)
py_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' sdk/python/pyproject.toml)
py_dunder=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' sdk/python/airlock/__init__.py)
for v in "sdk/typescript/package.json:$npm_version" "sdk/python/pyproject.toml:$py_version" "sdk/python/airlock/__init__.py:$py_dunder"; do
  [ "${v#*:}" = "$base" ] || die "${v%%:*} says version '${v#*:}', VERSION says '$base'"
done

if ! $snapshot; then
  [ -z "$(git status --porcelain)" ] || die "the work tree has changes; a release is built from a clean commit (or use --snapshot)"
  git tag --points-at HEAD | grep -qx "v$base" || die "HEAD is not tagged v$base (git tag -a v$base), or use --snapshot"
  grep -q "^## \[$base\]" CHANGELOG.md || die "CHANGELOG.md has no '## [$base]' section"
fi

rm -rf dist
mkdir -p dist
echo "airlock $version ($commit, $date) into dist/"

start=$SECONDS
for target in $targets; do
  goos=${target%/*}
  goarch=${target#*/}
  exe=airlock
  [ "$goos" = windows ] && exe=airlock.exe
  # dist/linux_amd64/airlock is what the Containerfile copies.
  out="dist/${goos}_${goarch}"
  mkdir -p "$out"
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -ldflags "$ldflags" -o "$out/$exe" ./cmd/airlock
  cp LICENSE README.md "$out/"
  name="airlock_${version}_${goos}_${goarch}"
  if [ "$goos" = windows ]; then
    (cd "$out" && rm -f "../$name.zip" && zip -q -X "../$name.zip" "$exe" LICENSE README.md)
  else
    tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$out" -cf - "$exe" LICENSE README.md |
      gzip -n > "dist/$name.tar.gz"
  fi
  echo "  $name ($((SECONDS - start)) s)"
done

# The container image of each Linux binary, from an empty base, with
# Debian's CA bundle for outbound TLS. No RUN step, so an arm64 image is
# built on an amd64 machine as it is: nothing runs during the build.
if $image; then
  command -v buildah >/dev/null || die "--image needs buildah (apt-get install buildah)"
  [ -f /etc/ssl/certs/ca-certificates.crt ] || die "--image needs /etc/ssl/certs/ca-certificates.crt (apt-get install ca-certificates)"
  cp /etc/ssl/certs/ca-certificates.crt dist/ca-certificates.crt
  for target in $targets; do
    [ "${target%/*}" = linux ] || continue
    arch=${target#*/}
    tag="localhost/airlock:$version-$arch"
    buildah --storage-driver vfs bud --quiet --isolation chroot --format docker --arch "$arch" --build-arg "TARGETARCH=$arch" \
      --timestamp "$epoch" -f Containerfile -t "$tag" . > /dev/null
    buildah --storage-driver vfs push --quiet "$tag" "oci-archive:dist/airlock_${version}_linux_${arch}.oci.tar:airlock:$version"
    buildah --storage-driver vfs rmi "$tag" > /dev/null
    echo "  airlock_${version}_linux_${arch}.oci.tar ($((SECONDS - start)) s)"
  done
fi

# An SBOM of each binary (CycloneDX JSON): every module compiled into it,
# with its version and hash, and the Go standard library, read from the
# build information in the binary (`go version -m`), so that it lists what
# that target's build took. cyclonedx-gomod is installed at a pinned
# version into .ci/bin, as .ci/run does with staticcheck. No -licenses: it
# would ask the module proxy for this very version, which is not there.
if ! [ -x .ci/bin/cyclonedx-gomod ] || ! .ci/bin/cyclonedx-gomod version 2>&1 | grep -q "$CYCLONEDX_GOMOD_VERSION"; then
  GOBIN="$PWD/.ci/bin" go install "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$CYCLONEDX_GOMOD_VERSION"
fi
for target in $targets; do
  goos=${target%/*}
  goarch=${target#*/}
  exe=airlock
  [ "$goos" = windows ] && exe=airlock.exe
  sbom="dist/airlock_${version}_${goos}_${goarch}.cdx.json"
  .ci/bin/cyclonedx-gomod bin -json -std -version "v$version" -output "$sbom" "dist/${goos}_${goarch}/$exe"
  grep -q '"bomFormat": "CycloneDX"' "$sbom" || die "$sbom is not a CycloneDX SBOM"
  grep -q '"name": "modernc.org/sqlite"' "$sbom" || die "$sbom does not list the modules compiled in"
  echo "  $(basename "$sbom")"
done

if $sdks; then
  # TypeScript: built with tsc, packed by npm (prepack copies LICENSE in).
  (
    cd sdk/typescript
    [ -d node_modules ] || npm ci --no-audit --no-fund --loglevel=error
    npm run --silent build
    npm pack --silent --pack-destination ../../dist > /dev/null
  )
  tgz="dist/airlockhq-sdk-$base.tgz"
  [ -f "$tgz" ] || die "npm pack wrote no $tgz"
  listing=$(tar -tzf "$tgz")
  for f in package/package.json package/LICENSE package/dist/index.js package/dist/index.d.ts package/dist/adapters/ai.js; do
    grep -qx "$f" <<<"$listing" || die "$tgz lacks $f"
  done
  echo "  $(basename "$tgz")"

  # Python: sdist and wheel through the SDK's own PEP 517 backend
  # (standard library only; no package index needed).
  (cd sdk/python && python3 -c '
import sys
sys.path.insert(0, "_build")
import airlock_build
print("  " + airlock_build.build_sdist(sys.argv[1]))
print("  " + airlock_build.build_wheel(sys.argv[1]))
' "$PWD/../../dist")
  sdist="dist/airlock_sdk-$base.tar.gz"
  wheel="dist/airlock_sdk-$base-py3-none-any.whl"
  # Listings read whole first: grep -q would end the pipe early, and
  # pipefail would take tar's broken pipe for a failure.
  listing=$(tar -tzf "$sdist")
  for f in LICENSE PKG-INFO pyproject.toml airlock/__init__.py airlock/client.py; do
    grep -qx "airlock_sdk-$base/$f" <<<"$listing" || die "$sdist lacks $f"
  done
  listing=$(python3 -m zipfile -l "$wheel")
  for f in "airlock_sdk-$base.dist-info/LICENSE" "airlock_sdk-$base.dist-info/METADATA" airlock/__init__.py airlock/client.py; do
    grep -q "^$f " <<<"$listing" || die "$wheel lacks $f"
  done
fi

(cd dist && shopt -s nullglob && files=(*.tar.gz *.zip *.tgz *.whl *.cdx.json *.oci.tar) && sha256sum -- "${files[@]}" > SHA256SUMS)
(cd dist && sha256sum --quiet -c SHA256SUMS) || die "SHA256SUMS does not check"
echo "dist/SHA256SUMS: $(wc -l < dist/SHA256SUMS) files, in $SECONDS s"
