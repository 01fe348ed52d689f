"""Memory of `import oai-pmh` against a provider whose list never ends (issue 30).

    python bench/oai_endless.py [--records 2000 8000] [--record-bytes 30000] [--code DIR]

The tests' endless provider (tests/oai_provider.py `Endless`: 100 new records a page, each
`--record-bytes` long, a new resumptionToken each) on a loopback port; for each number of
`--records`, one `archive-service import oai-pmh` in a process of its own, stopped by
`oai_max_records` (or, for code without the cap, killed once the provider has served that
many records), its peak RSS read from /proc. The figure that matters is the ratio of the
peaks: flat (about 1) when records stream into the import, growing with the records when
the harvest keeps them. `--code DIR`: run another checkout's package (main, before the fix).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from oai_provider import Endless, started_provider  # noqa: E402


def peak_rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def one_run(code: Path, records: int, record_bytes: int) -> dict:
    with (
        tempfile.TemporaryDirectory() as tmp,
        started_provider(Endless(page_size=100, record_bytes=record_bytes)) as provider,
    ):
        collection = Path(tmp) / "collection"
        collection.mkdir()
        command = [sys.executable, "-m", "archive_service.cli", "import", "oai-pmh"]
        command += [provider.url, "--collection", str(collection), "--dry-run"]
        command += ["--state-dir", str(Path(tmp) / "state"), "--archiveaddress", "b.example.org"]
        command += ["--archiveip", "192.0.2.10"]
        env = dict(os.environ, PYTHONPATH=str(code), ARCHIVE_SERVICE_OAI_MAX_RECORDS=str(records))
        started = time.monotonic()
        process = subprocess.Popen(
            command,
            env=env,
            cwd=tmp,  # `-m` puts the working directory first on the path
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        peak, capped = 0, True
        while process.poll() is None:
            peak = max(peak, peak_rss_kb(process.pid))
            if provider.pages * provider.page_size > records + 2 * provider.page_size:
                capped = False  # no cap: it would go on for ever
                process.kill()
                break
            time.sleep(0.05)
        process.wait()
        err = process.stderr.read()
        return {
            "records": records,
            "peak_rss_mb": round(peak / 1024, 1),
            "seconds": round(time.monotonic() - started, 1),
            "stopped_by_cap": capped,
            "last_line": err.strip().splitlines()[-1] if err.strip() else "",
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, nargs="+", default=[2000, 8000])
    parser.add_argument("--record-bytes", type=int, default=30_000)
    parser.add_argument("--code", type=Path, default=ROOT)
    args = parser.parse_args()
    runs = [one_run(args.code, n, args.record_bytes) for n in args.records]
    floor = runs[0]["peak_rss_mb"] or 1
    for run in runs:
        run["ratio_to_first"] = round(run["peak_rss_mb"] / floor, 2)
    print(json.dumps({"loadavg": Path("/proc/loadavg").read_text().split()[:3], "runs": runs}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
