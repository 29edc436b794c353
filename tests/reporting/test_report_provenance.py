"""The report's provenance section (harness.reporting.report_provenance): every run with its method,
seed and scores, then every provenance key once per distinct value with the runs that share it;
values in words, a path by its file name only, the settings last. (The whole report:
tests/commands/test_report_cmd.py.)"""

from __future__ import annotations

from typing import Any

from harness.reporting.report_provenance import plural, provenance_html


def record(run_id: str, seed: int, device: str, **extra: Any) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "status": "finished",
        "code_version": "git:abc123",
        "best_stsb_dev": 80.126,
        "best_step": 250,
        "final": {"sts": {"avg": 75.5}},
        "config": {"method": "simcse", "seed": seed, "corpus": "/home/someone/data/corpus/nli-sentences.txt"},
        "provenance": {"device": device, "compiled": False, "threads": None, **extra},
        "host": "node-1",
    }


def test_each_key_once_per_value_with_the_runs_that_share_it() -> None:
    page = provenance_html([record("r-2", 2, "cuda"), record("r-1", 1, "cpu", torch=[2, 5])])
    runs, keys = page.split('<table class="prov">')
    # the runs first, by id: method, seed, status, best dev at its step, the final averages
    assert runs.index('id="run-r-1"') < runs.index('id="run-r-2"')
    assert '<td>simcse</td><td>1</td><td class="status-finished">finished</td>' in runs
    assert "<td>80.13 (step 250)</td><td>75.50</td><td>&ndash;</td>" in runs  # no transfer score
    # shared by both: once, for all runs; differing: once per value, naming its runs
    assert "<tr><td>code_version</td><td>git:abc123</td><td>all 2 runs</td></tr>" in keys
    assert '<tr><td>device</td><td>cpu</td><td><a href="#run-r-1"><code>r-1</code></a></td></tr>' in keys
    assert '<tr><td>device</td><td>cuda</td><td><a href="#run-r-2"><code>r-2</code></a></td></tr>' in keys
    assert "<td>compiled</td><td>no</td>" in keys and "<td>threads</td><td>none</td>" in keys  # words
    assert "<pre>[\n  2,\n  5\n]</pre>" in keys  # a list as JSON
    # the machine's paths by their file name only; the settings after the provenance keys
    assert "/home/someone" not in page and "<td>\u2026/nli-sentences.txt</td>" in keys
    assert keys.index("<td>config.method</td>") > keys.index("<td>host</td>")


def test_a_single_run_is_named_and_no_runs_say_so() -> None:
    page = provenance_html([record("only-1", 1, "cpu")])
    assert "<tr><td>device</td><td>cpu</td><td><code>only-1</code></td></tr>" in page
    assert provenance_html([]) == "<p>No run records.</p>"
    assert [plural(n, "table") for n in (0, 1, 2)] == ["0 tables", "1 table", "2 tables"]
