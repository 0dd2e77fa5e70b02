"""Cues (trips/osm/cues.py) on generated maps whose turns are known (tests/osm_maps.py): the turns of the surfaced
town, onto the streets it names, and a roundabout's exit counted; the turn words by bearing change."""
import pytest

from tests.osm_maps import TOWN_TURNS, MapBuilder, map_support_or_skip, roundabout_town, surfaced_town
from trips.core.db import db
from trips.osm import cues, matcher
from trips.osm.importer import import_file


def ride(tmp_path, draw):
    map_support_or_skip(db.engine)
    m = MapBuilder()
    line = draw(m)
    import_file(db.engine, m.write(tmp_path / "town.osm.pbf"))
    return line, matcher.match(line)


def test_the_town_rides_three_turns_onto_the_streets_it_names(ctx, tmp_path):
    line, found = ride(tmp_path, surfaced_town)
    said = cues.cues(line, found)
    assert [(c["turn"], c["street"]) for c in said] == [(turn, street) for _km, turn, street in TOWN_TURNS]
    for c, (km, _t, _s) in zip(said, TOWN_TURNS):
        assert c["m"] / 1000 == pytest.approx(km, abs=0.05)
        assert -90 < c["lat"] < 90 and -180 < c["lon"] < 180


def test_a_roundabout_is_one_cue_with_the_exit_taken(ctx, tmp_path):
    line, found = ride(tmp_path, roundabout_town)
    said = cues.cues(line, found)
    assert [(c["turn"], c.get("exit"), c["street"]) for c in said] == [("roundabout", 3, "Rue Nord")]


@pytest.mark.parametrize("change, turn", [(0, "continue"), (19, "continue"), (-30, "slight_left"), (30, "slight_right"),
                                          (-90, "left"), (90, "right"), (-150, "sharp_left"), (150, "sharp_right"),
                                          (178, "u_turn"), (-175, "u_turn")])
def test_the_turn_follows_the_bearing_change(change, turn):
    assert cues.turn_of(change) == turn


def test_no_stretch_or_no_line_says_no_cue():
    assert cues.cues([(45.0, 5.0), (45.01, 5.0)], []) == []
    assert cues.cues([(45.0, 5.0)], []) == []
