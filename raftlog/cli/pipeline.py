"""`raftlog pipeline <job> ...`: the Spark jobs of raftlog.pipeline.jobs (export, import,
audit, windowed-count) from the command line; the remaining arguments go to the job (try
`raftlog pipeline export --help`).

Rules this module keeps: PySpark is an optional extra, so it is looked for before anything
of raftlog.pipeline is imported, and its absence is one line naming the extra to install
(exit 1), not an ImportError; the job's own ``main`` parses its arguments and maps its
failures to exit statuses (2 bad arguments, 1 failed or unreachable cluster, 4 an audit
that found differing replicas).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from raftlog.cli.common import EXIT_FAILED

# Job name -> module of raftlog.pipeline.jobs.
_JOB_MODULES = {
    "export": "export",
    "import": "importer",
    "audit": "audit",
    "windowed-count": "windowed_count",
}
_MISSING = "raftlog pipeline needs PySpark, which is not installed: pip install 'raftlog[pipeline]'"


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `pipeline <job>`."""
    pipeline = commands.add_parser(
        "pipeline",
        help="run a Spark job: export, import, audit, windowed-count (needs raftlog[pipeline])",
        description="Spark jobs over raftlog topics (docs/pipeline.md, Jobs). The arguments "
        "after the job name go to it: raftlog pipeline export --help.",
    )
    pipeline.add_argument("job", choices=tuple(_JOB_MODULES))
    pipeline.add_argument("job_args", nargs=argparse.REMAINDER)
    pipeline.set_defaults(handler=run)


def pyspark_missing() -> str | None:
    """Why the pipeline cannot run here, or None when PySpark and pyarrow import."""
    try:
        importlib.import_module("pyspark")
        importlib.import_module("pyarrow")
    except ImportError as error:
        return f"{_MISSING} ({error})"
    return None


def run(args: argparse.Namespace) -> int:
    missing = pyspark_missing()
    if missing is not None:
        print(f"raftlog: {missing}", file=sys.stderr)
        return EXIT_FAILED
    job = importlib.import_module(f"raftlog.pipeline.jobs.{_JOB_MODULES[args.job]}")
    return int(job.main(args.job_args))
