"""The embedded default on a busy day (issue: a database that never locks anyone out, workers that survive):
`make run`'s processes (the SQLite file, the filesystem broker, the real workers under scripts/run-local.sh)
take a repository upload, the similarity index of the demo set and a campaign at once, with sign-ins and
uploads in loops beside them, and the generate worker killed on purpose in the middle (tests/support/busy_day.py).

The longest write transaction is reported (bench/busy_day.py writes it to docs/benchmarks.md), not asserted: a
busy machine stretches any wall-clock time. What must hold whatever the load: no request is a 500 or a 503 (a
503 is a request that waited out SQLite's 30 s busy timeout), sign-ins are answered while the upload runs, the
killed worker is started again and the campaign finishes, no worker is left dead."""

import pytest

from tests.support.busy_day import busy_day
from tests.support.openai_server import OpenAITestServer

pytestmark = [pytest.mark.workers]

# Two demo sets (85 versions) keep the similarity index a few minutes on a busy 2-core machine; bench/busy_day.py
# indexes them all.
DEMO = ("arithmetic", "repositories")


def test_a_busy_day_on_the_embedded_default(tmp_path, record_property):
    with OpenAITestServer(latency_s=0.5, record_requests=False) as model:
        report = busy_day(tmp_path, model_url=model.base_url, demo=DEMO)
    longest = report.longest_write
    record_property("longest_write_transaction_ms", longest["max_ms"])
    print(f"longest write transaction: {longest['max_ms']} ms in {longest.get('process')}: {longest.get('statement')}")

    assert report.server_errors == []
    assert report.sign_ins and {answer.status for answer in report.sign_ins} == {302}
    assert report.uploads and {answer.status for answer in report.uploads} == {200}
    upload = report.repository_upload
    assert upload is not None and upload.status == 200
    # Sign-ins are not held up behind the upload: some are asked for and answered while it runs (its audit runs
    # the repository's tests in the sandbox, which takes many sign-ins' time).
    during = [answer for answer in report.sign_ins if upload.started < answer.started and answer.ended < upload.ended]
    assert during, "no sign-in was answered while the repository upload ran"
    assert report.indexed >= report.versions > 0
    assert report.campaign["status"] == "done"
    assert report.restarted == ["the generate worker"]
    assert report.workers_alive == {"generate": True, "cpu": True, "similarity": True, "beat": True}
    # The processes that open write transactions timed them: the web server, the verify and the similarity worker.
    processes = " ".join(entry["process"] for entry in report.write_reports)
    assert "runserver" in processes and "-Q verify" in processes and "-Q similarity" in processes
