"""`flask osm import FILE [--name NAME]` and `flask osm list`."""
import click
import sqlalchemy as sa
from flask.cli import AppGroup

from trips.core.db import db
from trips.osm.geometry import GEOD
from trips.osm.store import MapImportError
from trips.osm.tables import osm_area

osm_cli = AppGroup("osm", help="Manage the local OpenStreetMap data.")


@osm_cli.command("import")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False))
@click.option("--name", default=None, help="Region name (default: the file name without its extension); "
              "importing a region of the same name again replaces it.")
@click.option("--node-cache", default=None, type=click.Path(dir_okay=False),
              help="Keep node locations in this new file instead of memory (country-sized extracts); "
              "deleted afterwards.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def osm_import(path, name, node_cache, quiet):
    """Import an OpenStreetMap extract (.osm.pbf, .osm or .osm.bz2)."""
    from trips.osm.importer import import_file  # osmium: loaded by the command, not by every web worker

    echo = None if quiet else (lambda line: click.echo(line, err=True))
    try:
        result = import_file(db.engine, path, name=name, echo=echo, node_cache=node_cache)
    except MapImportError as exc:
        raise click.ClickException(exc.message) from None
    for note in result["notes"]:
        click.echo(note, err=True)
    kept = result["counts"]["kept"]
    replaced = len(result["replaced"])
    replaced = f"; replaced {replaced} earlier import{'s' if replaced > 1 else ''}" if replaced else ""
    click.echo(f"imported {result['name']}: " + ", ".join(f"{v} {k}" for k, v in kept.items())
               + f"; answers for {area_text(result['bbox'], result['bbox_source'])}{replaced}")


_SOURCES = {"header": "the file's header box, which holds all the data",
            "union": "the file's header box and the data beyond it",
            "data": "the extent of the data (the file has no header box)"}


def area_text(box, source: str) -> str:
    """"45.0000,5.0000 – 45.0100,5.0431 (1.1 × 3.4 km): <where it comes from>" (docs/RULES.md "Map coverage")."""
    south, west, north, east = box
    mid_lat, mid_lon = (south + north) / 2, (west + east) / 2
    tall = GEOD.inv(mid_lon, south, mid_lon, north)[2] / 1000
    wide = GEOD.inv(west, mid_lat, east, mid_lat)[2] / 1000
    return (f"{south:.4f},{west:.4f} – {north:.4f},{east:.4f} ({tall:.1f} × {wide:.1f} km): "
            + _SOURCES.get(source, source))


@osm_cli.command("list")
def osm_list():
    """The imported regions."""
    with db.engine.connect() as conn:
        a = osm_area.c
        rows = conn.execute(sa.select(a.name, a.source_file, a.imported_at, a.min_lat, a.min_lon, a.max_lat,
                                      a.max_lon).where(a.status == "ready").order_by(a.name)).all()
    if not rows:
        click.echo("no map data imported: run flask osm import FILE")
    for name, source, at, *box in rows:
        click.echo(f"{name}\t{source}\t{at:%Y-%m-%d %H:%M} UTC\t" + ",".join(f"{v:.4f}" for v in box))
