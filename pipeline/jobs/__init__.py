"""raftlog.pipeline.jobs: ready-made Spark jobs over raftlog topics (docs/pipeline.md, Jobs).

One module per job, each with ``main(argv) -> exit status``, run by ``raftlog pipeline <job>``
and, as a file, by ``spark-submit <path to the module> ...``: ``export`` (topic -> Parquet),
``importer`` (Parquet/CSV -> topic, exactly once per job id), ``audit`` (replica checksums),
``windowed_count`` (a streaming count by tag). runner.py holds what they share (arguments,
the session, exit statuses, the pinned offset plan) and progress_bar.py the batch jobs' bar.
Rules: a job talks to the cluster only through raftlog.client and the ``raftlog`` source
and sink; a bad argument exits 2, an unreachable cluster or a failed job 1, before any
traceback.
"""
