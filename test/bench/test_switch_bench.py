"""bench-switch writes the JSON the issue specifies, a plot beside it, and its numbers
order the modes as the switch they measure does."""

import json

from oxygen_ros.bench import switch as switch_benchmark
from oxygen_ros.model.loading import load_model


def test_bench_switch_json_plot_and_frozen_steps(tmp_path):
    loaded = load_model(preset="tiny")
    result = switch_benchmark.run(loaded, switch_benchmark.SwitchWorkload(chunks=4))
    png = switch_benchmark.write(result, str(tmp_path / "switch.json"))
    assert png.exists() and png.stat().st_size > 10_000
    switch_benchmark.plot(result, tmp_path / "new" / "folder" / "switch.png")   # folders made
    assert (tmp_path / "new" / "folder" / "switch.png").stat().st_size > 10_000
    data = json.loads((tmp_path / "switch.json").read_text())
    assert data["delays"] == [0.1, 0.3, 0.5]
    assert set(data["modes"]) == {"rtc", "rtc_vjp", "rtc_error", "crossfade", "none"}
    assert data["modes"]["rtc"] == data["modes"][f"rtc_{data['default_guidance']}"]
    assert data["rtc_cost_ratio"] > 0 and set(data["cost"]) == {"vjp", "error"}
    for delay in ("0.1", "0.3", "0.5"):
        numbers = {mode: data["modes"][mode][delay] for mode in data["modes"]}
        assert all(n["switches"] == 3 and n["switch_jump_ratio"] > 0 for n in numbers.values())
        # every mode's executed commands are judged against the world's expert
        assert all(0 < n["track_error"] < 1 for n in numbers.values()), numbers
        # the hard switch and the fade run the same plain chunks
        assert numbers["none"]["frozen_mae"] == numbers["crossfade"]["frozen_mae"]
        assert numbers["rtc_vjp"]["frozen_mae"] * 10 < numbers["none"]["frozen_mae"]
        assert numbers["rtc_error"]["frozen_mae"] * 10 < numbers["none"]["frozen_mae"]
        assert "trajectory" not in numbers["rtc"]                     # kept out of the JSON
    table = switch_benchmark.table(result)
    assert "rtc_vjp" in table and "x the plain one" in table
    header, *rows = table.splitlines()[1:6]
    assert {len(row) for row in rows} == {len(header)}                # columns line up
