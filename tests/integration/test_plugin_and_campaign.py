"""The pytest plugin through pytester, and campaigns end to end with resume, on real clusters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kafka_chaos.harness.campaign as campaign_mod
from kafka_chaos.harness.campaign import run_campaign

pytestmark = pytest.mark.cluster
pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[2]

CHAOS_TESTS = '''
import pytest

CONTROL = {"name": "tiny-control", "duration_s": 6, "cluster": {"nodes": 3},
           "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
           "workload": {"producers": 1, "rate": 100}}
LOSSY = {"name": "tiny-acks1-isolation", "duration_s": 26, "cluster": {"nodes": 3},
         "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
         "workload": {"producers": 2, "in_flight": 16, "rate": 400, "acks": "1", "idempotence": False},
         "faults": {"schedule": [{"kind": "partition", "shape": "isolate", "target": "leader",
                                  "at_s": 3, "duration_s": 18}]}}

@pytest.mark.chaos(scenario=CONTROL)
def test_control_passes(chaos_result):
    assert chaos_result.results["complete"]
    assert chaos_result.count("lost-write") == 0

@pytest.mark.chaos(scenario=LOSSY)
def test_lossy_run_fails_with_violations(chaos_result):
    pass
'''

# A strict policy for the inner session: every anomaly is a violation, so the acks=1 loss (which Kafka
# permits) fails the test and the plugin's failure message can be checked.
STRICT_CONFTEST = '''
import kafka_chaos.reference_model.verdicts
class Strict:
    verdict = "violation"
    reason = "strict test policy"


kafka_chaos.reference_model.verdicts.judge = lambda name, instance, config, faults: Strict()
'''


def test_plugin_runs_chaos_tests_and_fails_with_violations_and_report_path(pytester, kafka_chaos_pool, tmp_path):
    kafka_chaos_pool.release()  # the inner session starts its own cluster; never two at once
    pytester.makeconftest(STRICT_CONFTEST)
    pytester.makepyfile(test_tiny_chaos=CHAOS_TESTS)
    results_dir = tmp_path / "inner-results"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", f"--kafka-chaos-results={results_dir}",
                                           timeout=600)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "test_lossy_run_fails_with_violations" in out
    assert "violations (" in out and "lost-write" in out
    reports = [line for line in result.stdout.lines if "report:" in line]
    assert reports and "report.html" in reports[0]
    assert len(list(results_dir.glob("*/history.jsonl"))) == 2


def test_two_run_campaign_end_to_end_and_resume_after_interrupt(tmp_path, kafka_chaos_pool, monkeypatch):
    smoke = ROOT / "scenarios" / "campaigns" / "smoke.toml"
    calls: list[str] = []
    real_run = campaign_mod.run_scenario  # type: ignore[attr-defined]

    def interrupted_after_first(scenario, **kw):
        calls.append(scenario.name)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_run(scenario, **kw)

    monkeypatch.setattr(campaign_mod, "run_scenario", interrupted_after_first)
    with pytest.raises(KeyboardInterrupt):
        run_campaign(smoke, out=tmp_path, pool=kafka_chaos_pool)
    (cdir,) = (tmp_path / "campaigns").iterdir()
    summary = json.loads((cdir / "summary.json").read_text())
    assert (summary["total"], summary["done"]) == (2, 1)

    calls.clear()
    def counted(scenario, **kw):
        calls.append(scenario.name)
        return real_run(scenario, **kw)

    monkeypatch.setattr(campaign_mod, "run_scenario", counted)
    summary = run_campaign(smoke, out=tmp_path, pool=kafka_chaos_pool)
    assert len(calls) == 1, "resume must run only the run that was interrupted"
    assert (summary["total"], summary["done"], summary["failed"]) == (2, 2, 0)
    for run in summary["runs"]:
        assert run["status"] == "done" and run["passed"] and run["complete"]
        assert Path(run["run_dir"], "report.html").exists()
    index = (cdir / "index.html").read_text()
    by_verdict = index[index.index('id="runs-by-verdict"') :]
    by_verdict = by_verdict[: by_verdict.index("</table>")]
    assert by_verdict.count('<tr class="pass">') == 2, "both runs listed as passed"
    assert 'class="cell pass"' in index and 'class="cell violation"' not in index
    junit = (cdir / "junit.xml").read_text()
    assert junit.count("<testcase") == 2 and "<failure" not in junit
