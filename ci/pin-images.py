#!/usr/bin/env python3
"""Pins each GPU-runner image of ci/matrix.json (cells' gpu_runner.image, e.g.
nvidia/cuda:12.4.1-cudnn-devel-ubuntu22.04) to the digest its tag names today, so that a GPU
runner pulls exactly the image the matrix was blessed with. Run it where a registry is reachable
(a developer machine, a CI job with network), review the diff, commit it.

usage: ci/pin-images.py [--matrix FILE] [--check] [--registry URL]
  --check      change nothing: list the images not pinned yet; exit 1 if there are any
  --registry   the registry's v2 API (default https://registry-1.docker.io; tokens from
               auth.docker.io for Docker Hub)

Only the "digest" fields change (the file's layout is kept), and the file is written whole and
renamed into place. Exit status: 0 pinned (or --check: all pinned), 1 a registry did not answer
or some image is unpinned, 2 bad usage or a malformed matrix file.
"""
import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
from pitfall_drivers.files import write_atomically  # noqa: E402  (whole, mode 0644, then renamed)

MANIFEST_TYPES = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])


def resolve(registry: str, image: str) -> str:
    """The digest a tag names, from the registry's HEAD of the manifest (an index for
    multi-platform images: that is what `docker pull image@digest` takes)."""
    repo, tag = image.rsplit(":", 1)
    if "/" not in repo:
        repo = "library/" + repo
    headers = {"Accept": MANIFEST_TYPES}
    if "registry-1.docker.io" in registry:
        url = f"https://auth.docker.io/token?service=registry.docker.io&scope=repository:{repo}:pull"
        with urllib.request.urlopen(url, timeout=30) as r:
            headers["Authorization"] = "Bearer " + json.load(r)["token"]
    req = urllib.request.Request(f"{registry}/v2/{repo}/manifests/{tag}", method="HEAD", headers=headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        digest = r.headers.get("Docker-Content-Digest", "")
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ValueError(f"the registry gave no digest for {image} (header: {digest!r})")
    return digest


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--matrix", default=str(Path(__file__).resolve().parent / "matrix.json"))
    p.add_argument("--check", action="store_true")
    p.add_argument("--registry", default=os.environ.get("PITFALL_REGISTRY", "https://registry-1.docker.io"))
    args = p.parse_args()
    path = Path(args.matrix)
    try:
        text = path.read_text()
        doc = json.loads(text)
        runners = [c["gpu_runner"] for c in doc["cells"] if "gpu_runner" in c]
        images = sorted({r["image"] for r in runners})
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"pin-images: error: {path}: {e}", file=sys.stderr)
        return 2
    if args.check:
        unpinned = sorted({r["image"] for r in runners if not r.get("digest")})
        for image in unpinned:
            print(f"not pinned: {image}")
        return 1 if unpinned else 0
    failed, original = 0, text
    for image in images:
        try:
            digest = resolve(args.registry.rstrip("/"), image)
        except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
            print(f"pin-images: {image}: {args.registry} did not answer: {e}", file=sys.stderr)
            failed += 1
            continue
        pattern = re.compile(r'("image": "' + re.escape(image) + r'", "digest": )(null|"sha256:[0-9a-f]{64}")')
        text, n = pattern.subn(lambda m: m.group(1) + json.dumps(digest), text)
        if n == 0:
            print(f'pin-images: {path}: no \'"image": "{image}", "digest": \' on one line to pin (keep that layout)', file=sys.stderr)
            failed += 1
            continue
        print(f"{image} -> {digest} ({n} cell{'s' if n != 1 else ''})")
    json.loads(text)  # still the same document
    if text == original:
        return 1 if failed else 0
    write_atomically(path, text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
