"""The images a node of ours runs, built here without a registry and imported into containerd.

No registry is reachable from the machines that run the suite, so every image is an OCI
archive we write ourselves from code of ours or files of Debian packages:

- ``PAUSE_IMAGE``: the sandbox (containerd's ``sandbox_image``), ``tools/images/cmd/pause``;
- ``MAAS_API_IMAGE``: the maas-api stand-in, ``tools/images/cmd/maas-api-standin`` (what the
  controller, the kubelet's probes and the key-cleanup CronJob call, over HTTPS);
- ``MAAS_API_CRASHLOOP_IMAGE``: the same program told to exit at start;
- ``CLEANUP_IMAGE``: Debian's curl with exactly the shared libraries it loads.

Each runs as a numeric non-root user with nothing to write, as the rendered pods demand
(runAsNonRoot, readOnlyRootFilesystem; docs/platform.md §1). Tags are never ``latest``: the
kubelet would then always pull, and there is nothing to pull from.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import subprocess
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from devtools.cluster import REPO_ROOT

IMAGES_MODULE = REPO_ROOT / "tools" / "images"
PAUSE_IMAGE = "aitenant.local/pause:1"
MAAS_API_IMAGE = "aitenant.local/maas-api-standin:1"
MAAS_API_CRASHLOOP_IMAGE = "aitenant.local/maas-api-standin:crashloop"
CLEANUP_IMAGE = "aitenant.local/curl:1"
NONROOT = "65532:65532"


# An OCI archive of the real maas-api, built outside the repository (docs/maas-api.md): the
# node, the e2e suite and the demo then run it instead of the stand-in.
GIVEN_MAAS_API = "AITENANT_MAAS_API_IMAGE"


def given_maas_api() -> Path | None:
    """The archive ``AITENANT_MAAS_API_IMAGE`` names, if any."""
    value = os.environ.get(GIVEN_MAAS_API)
    if not value:
        return None
    archive = Path(value)
    if not archive.is_file():
        raise RuntimeError(f"{GIVEN_MAAS_API}={value}: no such OCI archive")
    return archive


@functools.cache
def archive_image_name(archive: Path) -> str:
    """The image name an OCI archive carries (``io.containerd.image.name``, as ``ctr`` reads
    it on import); read once per archive, as every controller start asks for it."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise RuntimeError(f"{archive}: no index.json")
        index = json.load(member)
    for manifest in index.get("manifests") or []:
        name = (manifest.get("annotations") or {}).get("io.containerd.image.name")
        if name:
            return name
    raise RuntimeError(f"{archive}: no manifest names its image (io.containerd.image.name)")


def maas_api_image() -> str:
    """The maas-api the node runs: the given real one, else the stand-in."""
    given = given_maas_api()
    return archive_image_name(given) if given is not None else MAAS_API_IMAGE


def runs_real_maas_api() -> bool:
    return given_maas_api() is not None


def controller_flags() -> list[str]:
    """The controller's flags naming the images the node holds: a controller started without
    them renders images nobody can pull here."""
    return [f"--maas-api-image={maas_api_image()}", f"--maas-api-cleanup-image={CLEANUP_IMAGE}"]


def cache_dir() -> Path:
    return Path(os.environ.get("AITENANT_CACHE") or Path.home() / ".cache" / "aitenant-k8s")


def go_binaries() -> Path:
    """``tools/images``' commands built once per content of the module (a few seconds)."""
    digest = hashlib.sha256()
    for path in sorted(IMAGES_MODULE.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(IMAGES_MODULE)).encode())
            digest.update(path.read_bytes())
    out = cache_dir() / f"images-{digest.hexdigest()[:16]}"
    if not (out / "pause").exists() or not (out / "maas-api-standin").exists():
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                *("go", "build", "-mod=readonly", "-trimpath", "-ldflags", "-s -w"),
                *("-o", f"{out}/", "./cmd/pause", "./cmd/maas-api-standin"),
            ],
            cwd=IMAGES_MODULE,
            env={**os.environ, "CGO_ENABLED": "0"},
            check=True,
        )
    return out


@dataclass
class Layer:
    """Files of one image layer: path in the image -> (content, mode)."""

    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)

    def add(self, path: str, content: bytes, mode: int = 0o755) -> None:
        self.files[path.lstrip("/")] = (content, mode)

    def tar(self) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            dirs: set[str] = set()
            for path in sorted(self.files):
                parts = path.split("/")[:-1]
                for i in range(1, len(parts) + 1):
                    d = "/".join(parts[:i])
                    if d not in dirs:
                        dirs.add(d)
                        info = tarfile.TarInfo(d)
                        info.type, info.mode = tarfile.DIRTYPE, 0o755
                        tar.addfile(info)
                content, mode = self.files[path]
                info = tarfile.TarInfo(path)
                info.size, info.mode = len(content), mode
                tar.addfile(info, io.BytesIO(content))
        return buf.getvalue()


def _blob(blobs: dict[str, bytes], data: bytes) -> dict[str, object]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    blobs[digest] = data
    return {"digest": digest, "size": len(data)}


def write_archive(path: Path, name: str, layer: Layer, *, entrypoint: list[str], user: str) -> Path:
    """An OCI image-layout archive holding one image, ``name``, as ``ctr images import``
    reads it."""
    blobs: dict[str, bytes] = {}
    layer_tar = layer.tar()
    layer_desc = {"mediaType": "application/vnd.oci.image.layer.v1.tar", **_blob(blobs, layer_tar)}
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "User": user, "Env": ["PATH=/usr/bin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [layer_desc["digest"]]},
    }
    config_desc = {
        "mediaType": "application/vnd.oci.image.config.v1+json",
        **_blob(blobs, json.dumps(config).encode()),
    }
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_desc,
        "layers": [layer_desc],
    }
    manifest_desc = {
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        **_blob(blobs, json.dumps(manifest).encode()),
        "platform": {"architecture": "amd64", "os": "linux"},
        "annotations": {
            "io.containerd.image.name": name,
            "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
        },
    }
    index = {"schemaVersion": 2, "manifests": [manifest_desc]}
    top = Layer()
    top.add("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode(), 0o644)
    top.add("index.json", json.dumps(index).encode(), 0o644)
    for digest, data in blobs.items():
        top.add(f"blobs/sha256/{digest.removeprefix('sha256:')}", data, 0o644)
    path.write_bytes(top.tar())
    return path


def shared_libraries(binary: Path) -> list[Path]:
    """What the dynamic loader loads for ``binary`` on this machine (``ldd``), loader
    included."""
    out = subprocess.run(["ldd", str(binary)], check=True, capture_output=True, text=True)
    libs = []
    for line in out.stdout.splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1:
            target = words[words.index("=>") + 1]
            if target.startswith("/"):
                libs.append(Path(target))
        elif words and words[0].startswith("/"):
            libs.append(Path(words[0]))
    return libs


def build_archives(out: Path) -> dict[str, Path]:
    """Every image of the node as an OCI archive in ``out``: image name -> archive."""
    out.mkdir(parents=True, exist_ok=True)
    bins = go_binaries()
    archives: dict[str, Path] = {}

    pause = Layer()
    pause.add("pause", (bins / "pause").read_bytes())
    archives[PAUSE_IMAGE] = write_archive(
        out / "pause.tar", PAUSE_IMAGE, pause, entrypoint=["/pause"], user=NONROOT
    )

    standin = Layer()
    standin.add("maas-api-standin", (bins / "maas-api-standin").read_bytes())
    archives[MAAS_API_IMAGE] = write_archive(
        out / "maas-api.tar",
        MAAS_API_IMAGE,
        standin,
        entrypoint=["/maas-api-standin"],
        user=NONROOT,
    )
    archives[MAAS_API_CRASHLOOP_IMAGE] = write_archive(
        out / "maas-api-crashloop.tar",
        MAAS_API_CRASHLOOP_IMAGE,
        standin,
        entrypoint=["/maas-api-standin", "--exit-at-start"],
        user=NONROOT,
    )

    curl = Path("/usr/bin/curl")
    if not curl.exists():
        raise RuntimeError("the cleanup image needs Debian's curl: apt-get install curl")
    rootfs = Layer()
    rootfs.add("usr/bin/curl", curl.read_bytes())
    for lib in shared_libraries(curl):
        # The loader finds each library under the path ldd printed (symlinks resolved here).
        rootfs.add(str(lib), lib.resolve().read_bytes())
    archives[CLEANUP_IMAGE] = write_archive(
        out / "curl.tar", CLEANUP_IMAGE, rootfs, entrypoint=[], user="65534:65534"
    )
    if (given := given_maas_api()) is not None:
        archives[archive_image_name(given)] = given
    return archives


def import_archives(address: Path, archives: dict[str, Path]) -> None:
    """Load each archive into containerd's CRI namespace (``k8s.io``) at ``address``."""
    for name, archive in archives.items():
        subprocess.run(
            ["ctr", "--address", str(address), "-n", "k8s.io", "images", "import", str(archive)],
            check=True,
            capture_output=True,
        )
        listed = subprocess.run(
            ["ctr", "--address", str(address), "-n", "k8s.io", "images", "ls", "-q"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        if name not in listed:
            raise RuntimeError(f"ctr imported {archive} but lists no {name}: {listed}")
