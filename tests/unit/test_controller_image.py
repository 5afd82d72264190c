"""The controller image scripts/build-controller-image writes is an OCI layout containerd
imports, holds a controller that runs, and carries the name the charm's resource is given.

The build is cached by the content of its inputs in ~/.cache/aitenant-k8s/controller-image:
about 15 s the first time after a change to src/aitenant, uv.lock or the builder, instantly
afterwards. The module builds it once.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
from pathlib import Path

import pytest
import yaml
from devtools import controller_image
from devtools.controller_image import ENTRYPOINT, REPO_ROOT, SITE_PACKAGES

from aitenant_charm.workload import WORKLOAD_UID


class Image:
    """The archive's index, manifest, config and layer, read back."""

    def __init__(self, archive: Path, work: Path):
        self.archive = archive
        with tarfile.open(archive) as tar:
            self.members = {m.name: m for m in tar.getmembers()}
            tar.extractall(work, filter="data")
        self.root = work
        self.index = json.loads((work / "index.json").read_text())
        (descriptor,) = self.index["manifests"]
        self.descriptor = descriptor
        self.manifest = json.loads(self.blob(descriptor).decode())
        self.config = json.loads(self.blob(self.manifest["config"]).decode())
        (layer,) = self.manifest["layers"]
        self.layer = self.root / "blobs" / "sha256" / layer["digest"].removeprefix("sha256:")
        with tarfile.open(self.layer) as tar:
            self.files = {m.name: m for m in tar.getmembers()}

    def blob(self, descriptor: dict) -> bytes:
        data = (self.root / "blobs" / "sha256" / descriptor["digest"].split(":")[1]).read_bytes()
        # a descriptor's digest and size are its blob's: what containerd verifies on import
        assert f"sha256:{hashlib.sha256(data).hexdigest()}" == descriptor["digest"]
        assert len(data) == descriptor["size"]
        return data

    def read(self, path: str) -> bytes:
        with tarfile.open(self.layer) as tar:
            member = tar.extractfile(path.lstrip("/"))
            assert member is not None, path
            return member.read()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return controller_image.build()


@pytest.fixture(scope="module")
def image(built: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Image:
    return Image(built[0], tmp_path_factory.mktemp("image"))


def test_the_archive_is_an_oci_image_layout(image: Image):
    assert json.loads((image.root / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    assert image.manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert image.descriptor["platform"] == {"architecture": "amd64", "os": "linux"}
    # the layer is stored uncompressed: its digest is the config's diff_id
    layer_digest = "sha256:" + hashlib.sha256(image.layer.read_bytes()).hexdigest()
    assert image.manifest["layers"][0]["digest"] == layer_digest
    assert image.config["rootfs"] == {"type": "layers", "diff_ids": [layer_digest]}


def test_the_image_is_named_as_the_charms_resource_is_told(image: Image, capsys):
    # GIVEN the name the build prints for `--resource controller-image=<name>`
    assert controller_image.main([]) == 0
    told = capsys.readouterr().err
    annotations = image.descriptor["annotations"]
    name = annotations["io.containerd.image.name"]
    # THEN it is the name containerd gives the imported image, and its tag is the ref name
    assert f"--resource controller-image={name}\n" in told
    assert annotations["org.opencontainers.image.ref.name"] == name.rsplit(":", 1)[1]
    # AND it follows metadata.yaml (no upstream-source: our local name, rockcraft's version)
    metadata = yaml.safe_load((REPO_ROOT / "metadata.yaml").read_text())
    rock = yaml.safe_load((REPO_ROOT / "rockcraft.yaml").read_text())
    upstream = metadata["resources"]["controller-image"].get("upstream-source")
    assert name == (upstream or f"aitenant.local/aitenant-controller:{rock['version']}")


def test_the_entrypoint_is_an_executable_launcher_of_the_controller(image: Image):
    (entrypoint,) = image.config["config"]["Entrypoint"]
    assert entrypoint == ENTRYPOINT
    member = image.files[entrypoint.lstrip("/")]
    assert member.isfile()
    assert member.mode & 0o111 == 0o111
    shebang, *code = image.read(entrypoint).decode().splitlines()
    interpreter = shebang.removeprefix("#!")
    assert image.files[interpreter.lstrip("/")].mode & 0o111
    # the launcher calls what [project.scripts] names
    assert "from aitenant.__main__ import main" in code
    env = dict(e.split("=", 1) for e in image.config["config"]["Env"])
    assert env["PYTHONPATH"] == SITE_PACKAGES
    assert f"{SITE_PACKAGES.lstrip('/')}/aitenant/app/__init__.py" in image.files


def test_the_image_runs_as_the_uid_the_charm_writes_files_as(image: Image):
    assert image.config["config"]["User"] == f"{WORKLOAD_UID}:{WORKLOAD_UID}"


def test_the_layer_holds_the_controller_extra_and_nothing_of_the_charm(image: Image):
    site = SITE_PACKAGES.lstrip("/")
    tops = {name.split("/")[3] for name in image.files if name.startswith(f"{site}/")}
    assert {"aitenant", "aiohttp", "prometheus_client", "lightkube", "httpx"} <= tops
    assert not {"ops", "pydantic", "aitenant_charm", "charm.py"} & tops
    assert "etc/ssl/certs/ca-certificates.crt" in image.files


def test_the_layer_holds_the_controller_as_the_checkout_has_it(image: Image):
    # uv keys its build of the project on pyproject.toml: a stale build once shipped a
    # controller without the flags the charm passed, and the unit crash-looped under Juju.
    source = Path(__file__).resolve().parents[2] / "src" / "aitenant"
    site = SITE_PACKAGES.lstrip("/")
    for path in sorted(source.rglob("*.py")):
        shipped = image.read(f"{site}/aitenant/{path.relative_to(source)}")
        assert shipped == path.read_bytes(), path


def test_the_unpacked_layer_runs_the_controller_with_its_own_interpreter(image: Image):
    help_text = controller_image.check_layer(image.layer)
    assert help_text.startswith("usage: aitenant-controller")
    assert "--gateway-namespace" in help_text


def test_the_check_refuses_a_library_taken_from_this_machine(tmp_path: Path):
    # GIVEN an unpacked image with the interpreter and the loader but none of their libraries
    (tmp_path / "usr/bin").mkdir(parents=True)
    (tmp_path / "lib64").mkdir()
    shutil.copy(controller_image.PYTHON.resolve(), tmp_path / "usr/bin/python3")
    shutil.copy(Path("/lib64/ld-linux-x86-64.so.2").resolve(), tmp_path / "lib64")
    # WHEN the libraries are checked, THEN the loader's fallback to this machine is caught
    with pytest.raises(RuntimeError, match=r"loads /\S+, not in the image"):
        controller_image._check_libraries_resolve_inside(
            tmp_path, tmp_path / "lib64/ld-linux-x86-64.so.2", str(tmp_path / "lib")
        )


def test_the_cache_keeps_the_three_most_recently_used_builds_and_nothing_else_is_touched(
    tmp_path: Path,
):
    # GIVEN five builds used at different times and a file of someone else's
    builds = [tmp_path / f"aitenant-controller-{i}{controller_image.SUFFIX}" for i in range(5)]
    for age, build in enumerate(builds):
        build.write_bytes(b"x")
        os.utime(build, (1000 - age, 1000 - age))
    other = tmp_path / "aitenant-controller-0123456789abcdef.tar"
    other.write_bytes(b"y")
    os.utime(other, (1, 1))
    # WHEN the cache is pruned
    controller_image.prune(tmp_path)
    # THEN the three newest builds remain, and the other file
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*(b.name for b in builds[:3]), other.name]
    )
