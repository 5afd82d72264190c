"""The controller's OCI image (rockcraft.yaml's content) built here from our code, without
rockcraft or a registry.

One layer: this machine's ``/usr/bin/python3`` with its standard library and the shared
libraries it and every extension module load (``ldd``), the CA bundle, and
``/opt/aitenant/site-packages`` holding the project and the ``controller`` extra's locked
packages (as the rock's uv part installs them: ``uv sync --no-dev --no-editable --extra
controller``), compiled to byte code as the rock ships it. The entry point
``/usr/local/bin/aitenant-controller`` is the ``[project.scripts]`` launcher; the user is the
rock's ``_daemon_`` (the charm writes the controller's key files as that uid).

The archive is an OCI image layout (``ctr -n k8s.io images import``), named by the charm's
``controller-image`` resource (metadata.yaml's ``upstream-source``, else
``aitenant.local/aitenant-controller:<rockcraft.yaml version>``), and cached by the content of
everything it is built from in ``~/.cache/aitenant-k8s/controller-image/``. Each build is
checked before it is cached: the layer is unpacked and its own interpreter, through its own
loader and libraries only, imports the controller and prints the entry point's ``--help``.

    python3 -m devtools.controller_image [OUT.tar]     (scripts/build-controller-image)
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

from devtools.images import cache_dir, shared_libraries
from devtools.pack_charm import REPO_ROOT, uv_binary

PYTHON = Path("/usr/bin/python3")
SITE_PACKAGES = "/opt/aitenant/site-packages"
ENTRYPOINT = "/usr/local/bin/aitenant-controller"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# rockcraft's `_daemon_` (rockcraft.yaml's run-user); src/aitenant_charm/workload.py's
# WORKLOAD_UID is the same number.
ROCK_USERS = {"_daemon_": "584792:584792"}
LOCAL_REGISTRY = "aitenant.local"
# Where Debian's loader looks for libraries (the layer keeps the paths ldd printed).
LIBRARY_DIRS = ("lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu")
# Parts of the standard library the controller never loads (tkinter's would need X11;
# config-* holds the static libpython for building C extensions, 32 MB).
STDLIB_SKIPPED = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3"}
STDLIB_SKIPPED_PREFIX = "config-"
LAUNCHER = b"""#!/usr/bin/python3
from aitenant.__main__ import main

main()
"""
# The cache's builds (their own suffix: prune() never touches another file there).
SUFFIX = ".oci.tar"
KEPT_BUILDS = 3
# Bumped when what this module puts in the image changes without its inputs changing.
LAYOUT = "1"


def image_name(root: Path = REPO_ROOT) -> str:
    """What the charm's ``controller-image`` resource names, else our local name."""
    metadata = yaml.safe_load((root / "metadata.yaml").read_text())
    upstream = metadata["resources"]["controller-image"].get("upstream-source")
    if upstream:
        return str(upstream)
    rock = yaml.safe_load((root / "rockcraft.yaml").read_text())
    return f"{LOCAL_REGISTRY}/{rock['name']}:{rock['version']}"


def run_user(root: Path = REPO_ROOT) -> str:
    rock = yaml.safe_load((root / "rockcraft.yaml").read_text())
    return ROCK_USERS[rock["run-user"]]


# --- what goes into the layer: path in the image -> (file on this machine, keep its mtime) ---


def _stdlib() -> Path:
    out = subprocess.run(
        [str(PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return Path(out)


def stdlib_files(stdlib: Path) -> Iterator[Path]:
    """The standard library with the byte code Debian compiled for it (timestamp-checked, so
    the sources keep their mtimes in the layer); no optimised byte code, no site-packages."""
    for path in sorted(stdlib.rglob("*")):
        relative = path.relative_to(stdlib)
        top = relative.parts[0]
        if top in STDLIB_SKIPPED or top.startswith(STDLIB_SKIPPED_PREFIX):
            continue
        if "site-packages" in relative.parts or "dist-packages" in relative.parts:
            continue
        if path.name.startswith("_tkinter") or ".opt-" in path.name or not path.is_file():
            continue
        yield path


PROJECT = "aitenant-k8s"


def install_site_packages(target: Path) -> None:
    """The project and its ``controller`` extra from uv.lock, for this machine's python3,
    compiled with hash-checked byte code (no mtime in it; the layer's are all 0)."""
    with tempfile.TemporaryDirectory(prefix="controller-image-") as tmp:
        requirements = Path(tmp) / "requirements.txt"
        requirements.write_text(
            subprocess.run(
                [
                    *(uv_binary(), "export", "--frozen", "--no-hashes", "--no-annotate"),
                    *("--no-header", "--no-dev", "--no-editable", "--extra=controller"),
                ],
                cwd=REPO_ROOT,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        subprocess.run(
            [
                *(uv_binary(), "pip", "install", "--quiet", "--no-config", "--no-deps"),
                *("--python", str(PYTHON), "--target", str(target)),
                *("--requirement", str(requirements), "--no-compile"),
                # uv keys its build of a local project on pyproject.toml, not on src/: without
                # this, a changed src/aitenant would ship the previous build's package.
                *("--refresh-package", PROJECT),
            ],
            cwd=REPO_ROOT,
            check=True,
            env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )
    # scripts of the packages (their shebangs name this machine's interpreter): not run here
    shutil.rmtree(target / "bin", ignore_errors=True)
    subprocess.run(
        [
            *(str(PYTHON), "-m", "compileall", "-q", "-j0"),
            *("--invalidation-mode", "unchecked-hash", "-d", SITE_PACKAGES, str(target)),
        ],
        check=True,
    )


def _extension_modules(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.so*") if p.is_file())


def system_libraries(binaries: list[Path], own: Path) -> dict[str, Path]:
    """The shared libraries of this machine ``binaries`` load (those under ``own`` ship with
    the packages): path the loader asks for -> the file."""
    found: dict[str, Path] = {}
    for binary in binaries:
        for lib in shared_libraries(binary):
            if not lib.is_relative_to(own):
                found[str(lib).lstrip("/")] = lib.resolve()
    return found


def layer_files(site: Path) -> dict[str, tuple[Path, bool]]:
    """Every file of the image: its path -> (source, keep the source's mtime)."""
    stdlib = _stdlib()
    files: dict[str, tuple[Path, bool]] = {
        "usr/bin/python3": (PYTHON.resolve(), False),
        CA_BUNDLE.as_posix().lstrip("/"): (CA_BUNDLE.resolve(), False),
    }
    stdlib_in_image = stdlib.as_posix().lstrip("/")
    for path in stdlib_files(stdlib):
        files[f"{stdlib_in_image}/{path.relative_to(stdlib).as_posix()}"] = (path, True)
    binaries = [PYTHON, *_extension_modules(stdlib / "lib-dynload", site)]
    binaries = [b for b in binaries if not b.name.startswith("_tkinter")]
    for in_image, lib in system_libraries(binaries, site).items():
        files[in_image] = (lib, False)
    for path in sorted(site.rglob("*")):
        if path.is_file():
            files[f"{SITE_PACKAGES.lstrip('/')}/{path.relative_to(site).as_posix()}"] = (
                path,
                False,
            )
    return files


# --- the archive ---


def _dir_info(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info


def write_layer(out: Path, files: dict[str, tuple[Path, bool]], extra: dict[str, bytes]) -> None:
    """A reproducible tar: sorted, owned by root, mtime 0 unless kept, modes 0755 or 0644."""
    entries = dict(files)
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for name in sorted({*entries, *extra}):
            parts = name.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                if (d := "/".join(parts[:i])) not in dirs:
                    dirs.add(d)
                    tar.addfile(_dir_info(d))
            if name in extra:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(extra[name]), 0o755
                tar.addfile(info, io.BytesIO(extra[name]))
                continue
            source, keep_mtime = entries[name]
            st = source.stat()
            info = tarfile.TarInfo(name)
            info.size = st.st_size
            info.mode = 0o755 if st.st_mode & 0o111 else 0o644
            info.mtime = int(st.st_mtime) if keep_mtime else 0
            with source.open("rb") as handle:
                tar.addfile(info, handle)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def image_config(layer_digest: str, user: str) -> dict:
    return {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": [ENTRYPOINT],
            "User": user,
            "Env": [
                "PATH=/usr/local/bin:/usr/bin:/bin",
                f"PYTHONPATH={SITE_PACKAGES}",
                # the byte code is shipped; the user could not write more anyway
                "PYTHONDONTWRITEBYTECODE=1",
            ],
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_digest}"]},
    }


def write_image(out: Path, layer: Path, name: str, user: str) -> None:
    """An OCI image layout holding ``layer`` as the one image ``name``, as ``ctr`` imports it."""
    layer_digest = _sha256(layer)
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> dict[str, object]:
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return {"digest": f"sha256:{digest}", "size": len(data)}

    config = json.dumps(image_config(layer_digest, user), sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **blob(config)},
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": f"sha256:{layer_digest}",
                "size": layer.stat().st_size,
            }
        ],
    }
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                **blob(json.dumps(manifest, sort_keys=True).encode()),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rsplit(":", 1)[1],
                },
            }
        ],
    }
    top = {
        "oci-layout": json.dumps({"imageLayoutVersion": "1.0.0"}).encode(),
        "index.json": json.dumps(index, sort_keys=True).encode(),
    }
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            tar.addfile(_dir_info(d))
        tar.add(layer, f"blobs/sha256/{layer_digest}", filter=_reset)
        for digest, data in sorted(blobs.items()):
            _add_bytes(tar, f"blobs/sha256/{digest}", data)
        for member, data in top.items():
            _add_bytes(tar, member, data)


def _reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime, info.mode, info.uid, info.gid, info.uname, info.gname = 0, 0o644, 0, 0, "", ""
    return info


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o644
    tar.addfile(info, io.BytesIO(data))


# --- the check ---


def check_layer(layer: Path) -> str:
    """Unpack ``layer`` and run the controller with the image's interpreter, loader and
    libraries only (no chroot: the loader is called directly); its ``--help``."""
    with tempfile.TemporaryDirectory(prefix="controller-image-check-") as tmp:
        root = Path(tmp)
        with tarfile.open(layer) as tar:
            tar.extractall(root, filter="tar")
        loader = root / "lib64" / "ld-linux-x86-64.so.2"
        libs = ":".join(str(root / d) for d in LIBRARY_DIRS)
        python = [str(loader), "--inhibit-cache", "--library-path", libs]
        python.append(str(root / "usr/bin/python3"))
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONHOME": str(root / "usr"),
            "PYTHONPATH": str(root / SITE_PACKAGES.lstrip("/")),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        _check_libraries_resolve_inside(root, loader, libs)
        probe = (
            "import sys, aitenant.app, ssl, sqlite3, ctypes, lzma, bz2; "
            "assert sys.prefix.startswith(sys.argv[1]), sys.prefix; print(sys.version)"
        )
        subprocess.run([*python, "-s", "-c", probe, str(root)], env=env, check=True,
                       capture_output=True)  # fmt: skip
        return subprocess.run(
            [*python, "-s", str(root / ENTRYPOINT.lstrip("/")), "--help"],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout


def _check_libraries_resolve_inside(root: Path, loader: Path, libs: str) -> None:
    """Every shared library the interpreter and the extension modules need is the image's own:
    the loader, told to look only in the image, lists none of this machine's."""
    binaries = [root / "usr/bin/python3", *_extension_modules(root / "usr/lib", root / "opt")]
    for binary in binaries:
        listed = subprocess.run(
            [str(loader), "--inhibit-cache", "--library-path", libs, "--list", str(binary)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        for line in listed.splitlines():
            words = line.split()
            if "=>" in words and words[-1].startswith("(") and words[-2] != "=>":
                resolved = words[words.index("=>") + 1]
                if resolved.startswith("/") and not resolved.startswith(str(root)):
                    raise RuntimeError(f"{binary.name} loads {resolved}, not in the image")
            elif "not found" in line:
                raise RuntimeError(f"{binary.name}: {line.strip()}")


# --- build, cached ---


def _tree_digest(digest, root: Path) -> None:
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())


def input_digest() -> str:
    """What decides the image's content: our code and lock, this module, the interpreter."""
    digest = hashlib.sha256(LAYOUT.encode())
    for name in ("uv.lock", "pyproject.toml", "rockcraft.yaml", "metadata.yaml", "README.md"):
        digest.update((REPO_ROOT / name).read_bytes())
    _tree_digest(digest, REPO_ROOT / "src" / "aitenant")
    digest.update(Path(__file__).read_bytes())
    digest.update(PYTHON.resolve().read_bytes())
    return digest.hexdigest()[:16]


def prune(directory: Path, keep: int = KEPT_BUILDS) -> None:
    """Drop all but the ``keep`` most recently used builds of ours: each change to
    src/aitenant makes a new one of about 100 MB."""
    builds = sorted(directory.glob(f"*{SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in builds[keep:]:
        stale.unlink(missing_ok=True)


def build(out: Path | None = None) -> tuple[Path, str]:
    """The image archive (cached) and its name; copied to ``out`` when given."""
    name = image_name()
    cached = cache_dir() / "controller-image" / f"aitenant-controller-{input_digest()}{SUFFIX}"
    if cached.is_file():
        cached.touch()  # most recently used: kept by prune()
    else:
        cached.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="controller-image-", dir=cached.parent) as tmp:
            site, layer = Path(tmp) / "site-packages", Path(tmp) / "layer.tar"
            install_site_packages(site)
            write_layer(layer, layer_files(site), {ENTRYPOINT.lstrip("/"): LAUNCHER})
            check_layer(layer)
            partial = Path(tmp) / "image.tar"
            write_image(partial, layer, name, run_user())
            partial.replace(cached)
        prune(cached.parent)
    if out is not None:
        shutil.copyfile(cached, out)
        return out, name
    return cached, name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/build-controller-image",
        description="Build the controller's OCI image (an image-layout tar) from this checkout.",
    )
    parser.add_argument("out", nargs="?", type=Path, help="copy the archive here (a .tar)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    archive, name = build(args.out)
    print(f"{archive} ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    print(f"image: {name}", file=sys.stderr)
    print(f"  import: ctr -n k8s.io images import {archive}", file=sys.stderr)
    print(f"  deploy: juju deploy ... --resource controller-image={name}", file=sys.stderr)
    print(archive)
    return 0


if __name__ == "__main__":
    sys.exit(main())
