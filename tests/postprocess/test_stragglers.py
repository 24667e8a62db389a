"""`trident-post stragglers`: a rank slowed on purpose (the test-only TRIDENT_TEST_SLOW_RANK, DESIGN.md
"Timeline") is found among its stage's peers, by about its factor and since the first step; the same
grid without it has none; a malformed setting is exit 2 on every rank."""
import json
import os
import subprocess
import sys

from conftest import REPO, run_trident

POST = REPO / "postprocess" / "trident-post"
# Actions of 20 ms and more, so that a sleep's overshoot on loaded cores (a millisecond or two) stays small
# against them: at 6 ms a CI run measured 1.81 for the factor 1.6.
GRID = ("parallel.pp=2", "parallel.dp=2", "emulate.enabled=true", "train.steps=5", "schedule.microbatches=4",
        "emulate.forward_ms=20", "emulate.backward_ms=40", "checkpoint.every=0")


def stragglers(run_dir, *options):
    result = subprocess.run([sys.executable, str(POST), "stragglers", str(run_dir), "--threshold", "1.3", *options],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def test_a_slowed_rank_is_found_by_how_much_and_since_when(tmp_path):
    env = dict(os.environ, TRIDENT_TEST_SLOW_RANK="3:1.6")
    run_trident(tmp_path / "slow", *GRID, ranks=4, env=env)
    found = json.loads(stragglers(tmp_path / "slow", "--json").stdout)
    assert [s["rank"] for s in found["stragglers"]] == [3], found
    assert found["stragglers"][0]["since_step"] == 1 and found["stragglers"][0]["until_step"] == 5
    assert 1.4 < found["stragglers"][0]["ratio"] < 1.8, found
    text = stragglers(tmp_path / "slow", "-o", str(tmp_path / "s.png"), "--width", "800", "--height", "400").stdout
    assert "r3 tp0 pp1 dp1" in text and "since step 1" in text, text
    assert (tmp_path / "s.png").read_bytes()[:4] == b"\x89PNG"


def test_no_rank_is_found_without_one_and_a_bad_setting_is_refused(tmp_path):
    run_trident(tmp_path / "even", *GRID, ranks=4)
    assert json.loads(stragglers(tmp_path / "even", "--json").stdout)["stragglers"] == []
    proc = run_trident(tmp_path / "bad", *GRID, ranks=4, env=dict(os.environ, TRIDENT_TEST_SLOW_RANK="three"),
                       expect=2)
    assert "TRIDENT_TEST_SLOW_RANK" in proc.stderr and "RANK:FACTOR" in proc.stderr, proc.stderr
