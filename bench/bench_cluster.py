"""Sharded runs on a local cluster (issue 12, section 3). Run: ``.venv/bin/python bench/bench_cluster.py``.

PostgreSQL and Redis come from ``scripts/cluster.sh services`` (as ``make cluster`` starts
them), workers are ``evalsite queue_worker`` processes (RQ, forked work-horses) and every run is
``evalsite eval --executor queue``. Figures are read from the database: a run's throughput is
its cases over ``finished - started`` (first shard claimed to last shard done; the workers are
up before the run starts).

1. scaling: 10,000 cases x a 100 ms asyncio target, concurrency 50 per worker, 1 -> 2 -> 4
   workers (targets: >= 1.9x and, issue 30's floor 6, >= 3.8x of one worker);
2. kill -9: a 10,000-case run (same target, 2 workers) during which a worker holding a shard
   with cases in flight is killed -9 (with its work-horse) 10 times, a fresh worker started
   each time (target: 0 lost, 0 duplicated, the run finishes);
3. CPU-bound: ~5 ms of Python per case, 1 -> 2 workers (target, issue 30's floor 6: >= 1.8x on 2
   cores);
4. for docs/scale.md: queue latency (enqueue to claim, idle workers), per-shard overhead, and
   the database write rate (a no-op target, 4 workers).

Each run's line also says how many cores the cluster's processes used (workers and their
horses, PostgreSQL, Redis, the CLI) and how many every other process on the machine took
meanwhile: on a shared machine the ratios are bounded by the CPU the cluster got.

Scaling and CPU-bound run ``--reps`` (3) interleaved repetitions (1, 2, 4 workers, then again):
each ratio is taken within a repetition and printed as min / median / max, with the load
average before and after each repetition. Each run's line also gives the time from its last
shard done to the run finished (the last worker rebuilds the summary from the database) and
how many shards were delivered more than once.

Options: ``--cases N`` (10000), ``--kills N`` (10), ``--reps N`` (3), ``--workers 1,2,4``,
``--compare TREE`` (repeatable: the scaling runs also with another checkout's workers and CLI,
e.g. an older commit exported with ``git archive``, interleaved with this one's: a before/after
table in one run), ``--skip scaling,kill,cpu,overhead``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from machine_speed import machine_line  # noqa: E402

from tests.support.cluster import Cluster, children, wait_until, write_agents, write_set  # noqa: E402

LEASE = {"EVALSITE_SHARD_LEASE_S": "3", "EVALSITE_HEARTBEAT_S": "0.5"}


def workers_up(cluster: Cluster, n: int, **env: str) -> None:
    """Start workers (with ``env``) until ``n`` run; wait until RQ lists them all."""
    import redis
    from rq import Worker

    while len([w for w in cluster.workers if w.poll() is None]) < n:
        cluster.start_worker(**env)
    connection = redis.Redis.from_url(cluster.services["EVALSITE_REDIS_URL"])
    wait_until(f"{n} workers", lambda: Worker.count(connection=connection) >= n, timeout_s=120)


def cpu_times(cluster: Cluster) -> tuple[float, float, float]:
    """CPU seconds so far: the whole machine busy, the machine total (both all cores, from
    /proc/stat), and the cluster's own processes (workers with their horses, PostgreSQL, Redis,
    and the CLIs this process waited for)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    pids = set()
    for worker in cluster.workers:
        pids |= {worker.pid, *children(worker.pid)}
    postmaster = int((cluster.folder / "pg" / "postmaster.pid").read_text().split()[0])
    pids |= {postmaster, *children(postmaster), int((cluster.folder / "redis.pid").read_text())}
    ours = os.times().children_user + os.times().children_system
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ours += sum(int(v) for v in stat[11:15]) / hz  # utime, stime, cutime, cstime
    return (sum(fields) - fields[3] - fields[4]) / hz, sum(fields) / hz, ours


def machine(cluster: Cluster, before: tuple[float, float, float]) -> str:
    """The cores the cluster used since ``before``, and those every other process used."""
    busy, total, ours = cpu_times(cluster)
    wall = (total - before[1]) / (os.cpu_count() or 1)
    used = (ours - before[2]) / wall
    others = max(0.0, (busy - before[0]) / wall - used)
    return f"cluster used {used:.2f} cores, other processes {others:.2f} of {os.cpu_count()}"


def tree_env(tree: Path | None) -> dict[str, str]:
    """The environment that runs the workers and the CLI from another checkout ``tree`` (its
    packages first on ``PYTHONPATH``, ahead of this checkout's editable install); ``{}``: this one."""
    return {} if tree is None else {"PYTHONPATH": str(tree)}


def run(cluster: Cluster, agents: Path, name: str, *args: str, **env: str) -> dict[str, Any]:
    """One queued run to its end; its row and timings from the database, and how busy the
    machine was meanwhile (the ratios are bounded by the CPU the cluster got)."""
    before = cpu_times(cluster)
    cli = cluster.start_eval(str(agents), "--set", name, *args, **env)
    out, err = cli.communicate(timeout=3600)
    if cli.returncode != 0:
        raise SystemExit(f"eval failed ({cli.returncode}): {out}{err}")
    return {**figures(cluster, cluster.latest_run_id()), "machine": machine(cluster, before)}


def figures(cluster: Cluster, eval_run_id: str) -> dict[str, Any]:
    row = cluster.run_row(eval_run_id)
    [(elapsed,)] = cluster.sql(
        "SELECT EXTRACT(EPOCH FROM finished - started) FROM evals_evalrun WHERE id = %s", [eval_run_id]
    )
    [(rows, distinct)] = cluster.sql(
        "SELECT COUNT(*), COUNT(DISTINCT (case_id, repeat_index)) FROM evals_evalresult WHERE eval_run_id = %s",
        [eval_run_id],
    )
    shards = cluster.sql(
        "SELECT EXTRACT(EPOCH FROM started - enqueued_at), EXTRACT(EPOCH FROM finished - started), "
        "jsonb_array_length(case_ids), attempts FROM evals_evalshard WHERE eval_run_id = %s",
        [eval_run_id],
    )
    [(last, enqueued_again)] = cluster.sql(
        "SELECT EXTRACT(EPOCH FROM r.finished - MAX(s.finished)), "
        "COUNT(*) FILTER (WHERE s.enqueued_at > "
        "(SELECT MIN(enqueued_at) FROM evals_evalshard WHERE eval_run_id = r.id)) "
        "FROM evals_evalshard s JOIN evals_evalrun r ON r.id = s.eval_run_id WHERE r.id = %s GROUP BY r.id, r.finished",
        [eval_run_id],
    )
    return {
        "id": eval_run_id,
        **row,
        "end_s": float(last or 0.0),
        "enqueued_again": int(enqueued_again),
        "elapsed_s": float(elapsed),
        "rows": rows,
        "distinct": distinct,
        "rate": row["n_done"] / float(elapsed),
        "shards": [(float(a), float(b), n, k) for a, b, n, k in shards],
    }


def ratio_line(label: str, values: list[float], target: float) -> str:
    """``min / median / max`` of the ratios measured, against the target (the median decides)."""
    mid = statistics.median(values)
    ok = "ok" if mid >= target else "BELOW TARGET"
    spread = f"min {min(values):.2f} / median {mid:.2f} / max {max(values):.2f}x"
    return f"  {label}: {spread} over {len(values)} reps (target >= {target}x; median {mid / target:.2f} of it) {ok}"


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def load() -> float:
    return os.getloadavg()[0]


def end_line(got: dict[str, Any]) -> str:
    """Where a run's last second went: the last shard done -> the run finished (its summary rebuilt
    from the database by the last worker), and shards enqueued again (a lapsed lease, or a job
    taken for lost: either runs at the queue's tail)."""
    return f"last shard done -> run finished {got['end_s']:.2f} s; shards enqueued again: {got['enqueued_again']}"


def scaling(
    cluster: Cluster,
    agents: Path,
    name: str,
    n: int,
    reps: int,
    counts: tuple[int, ...],
    trees: tuple[Path | None, ...] = (None,),
) -> None:
    """``reps`` repetitions of 1 -> 2 -> 4 workers, interleaved (each repetition runs every worker
    count, so a machine whose load drifts moves all of them); the ratios are taken within a
    repetition (its N workers against its 1 worker). With other ``trees`` (``--compare``), each
    repetition runs every count for this checkout, then for each of them, in turn."""
    print(f"\n1. scaling: {n:,} cases x 100 ms, concurrency 50 per worker, shards of 250; {reps} interleaved reps")
    rates: dict[tuple[str, int], list[float]] = {}
    labels = [("this" if tree is None else tree.name) for tree in trees]
    for rep in range(reps):
        before = load()
        for label, tree in zip(labels, trees, strict=True):
            env = tree_env(tree)
            for workers in counts:
                cluster.stop_workers()
                workers_up(cluster, workers, **env)
                got = run(
                    cluster, agents, name, "--variant", "sleepy", "--concurrency", "50", "--shard-size", "250", **env
                )
                ideal = n * 0.1 / (50 * workers)
                rates.setdefault((label, workers), []).append(got["rate"])
                print(
                    f"  rep {rep + 1}, {label}, {workers} worker(s): {got['elapsed_s']:.2f} s, "
                    f"{got['rate']:,.0f} cases/s "
                    f"(ideal {ideal:.1f} s: {got['elapsed_s'] / ideal:.2f}x ideal); "
                    f"stored {got['rows']:,}/{got['n_total']:,}; {end_line(got)}; {got['machine']}"
                )
        print(f"  rep {rep + 1}: load average {before:.2f} before, {load():.2f} after")
    for label in labels:
        for workers in counts:
            print(
                f"  {label}, {workers} worker(s): cases/s min / median / max {spread(rates[label, workers], '{:,.0f}')}"
            )
        for workers, target in ((2, 1.9), (4, 3.8)):
            if (label, workers) in rates and (label, 1) in rates:
                ratios = [a / b for a, b in zip(rates[label, workers], rates[label, 1], strict=True)]
                print(ratio_line(f"{label}: {workers} workers vs 1", ratios, target))
    cluster.stop_workers()


def kills(cluster: Cluster, agents: Path, name: str, n: int, times: int) -> None:
    print(f"\n2. kill -9: {n:,} cases x 100 ms, 2 workers at concurrency 50, shards of 250, {times} kills")
    workers_up(cluster, 2)
    cli = cluster.start_eval(
        str(agents), "--set", name, "--variant", "sleepy", "--concurrency", "50", "--shard-size", "250"
    )
    [(eval_run_id,)] = wait_until(
        "the run", lambda: cluster.sql("SELECT id FROM evals_evalrun WHERE n_shards > 0 AND status = 'running'")
    )
    killed = 0
    spacing = max(1, n // (times + 2))  # kills spread over the run
    while killed < times and cli.poll() is None:
        target = cluster.run_row(eval_run_id)["n_done"] + (spacing if killed else spacing // 2)

        def ready(target: int = target) -> object:
            if cli.poll() is not None:
                return "ended"
            if cluster.run_row(eval_run_id)["n_done"] < target:
                return None
            return holder(cluster, eval_run_id)

        victim = wait_until("a shard in flight", ready, timeout_s=600)
        if victim == "ended":
            break
        cluster.kill_worker(victim)
        cluster.workers.remove(victim)
        cluster.start_worker()
        killed += 1
    cli.communicate(timeout=3600)
    got = figures(cluster, eval_run_id)
    [(traces,)] = cluster.sql("SELECT COUNT(*) FROM traces_run WHERE run_id LIKE %s", [f"{eval_run_id}:%"])
    redelivered = sum(1 for s in got["shards"] if s[3] > 1)
    lost = got["n_total"] - got["distinct"]
    duplicated = got["rows"] - got["distinct"]
    print(
        f"  {killed} kills; run {got['status']} in {got['elapsed_s']:.1f} s (exit {cli.returncode}); "
        f"{redelivered} shard(s) delivered again"
    )
    print(
        f"  results {got['rows']:,} of {got['n_total']:,}: lost {lost}, duplicated {duplicated}; "
        f"counters n_done {got['n_done']:,}; traces {traces:,}"
    )
    ok = got["status"] == "finished" and lost == 0 and duplicated == 0 and killed == times
    print(f"  target: 0 lost, 0 duplicated, finished, {times} kills: {'ok' if ok else 'NOT MET'}")
    cluster.stop_workers()


def holder(cluster: Cluster, eval_run_id: str) -> Any:
    """A worker whose work-horse holds a running shard with cases in flight, if any."""
    rows = cluster.sql(
        "SELECT worker FROM evals_evalshard WHERE eval_run_id = %s AND status = 'running' AND in_flight != '[]'",
        [eval_run_id],
    )
    horses = {int(w.rsplit(":", 1)[1]) for (w,) in rows}
    return next((w for w in cluster.workers if w.poll() is None and horses & set(children(w.pid))), None)


def cpu_bound(cluster: Cluster, agents: Path, tmp: Path, reps: int) -> None:
    n = 2000
    name = "bench-cluster-cpu"
    cluster.evalsite("import", str(write_set(tmp / f"{name}.jsonl", n)), "--name", name)
    print(f"\n3. CPU-bound: {n:,} cases x ~5 ms of Python, concurrency 4, shards of 100; {reps} interleaved reps")
    rates: dict[int, list[float]] = {1: [], 2: []}
    for rep in range(reps):
        before = load()
        for workers in (1, 2):
            cluster.stop_workers()
            workers_up(cluster, workers)
            got = run(cluster, agents, name, "--variant", "cpu", "--concurrency", "4", "--shard-size", "100")
            rates[workers].append(got["rate"])
            print(
                f"  rep {rep + 1}, {workers} worker(s): {got['elapsed_s']:.2f} s, {got['rate']:,.0f} cases/s "
                f"(one core's ideal: 200/s); {end_line(got)}; {got['machine']}"
            )
        print(f"  rep {rep + 1}: load average {before:.2f} before, {load():.2f} after")
    ratios = [a / b for a, b in zip(rates[2], rates[1], strict=True)]
    print(ratio_line("2 workers vs 1", ratios, 1.8))
    cluster.stop_workers()


def overhead(cluster: Cluster, agents: Path, name: str, tmp: Path) -> None:
    print("\n4. queue latency, per-shard overhead, database write rate")
    workers_up(cluster, 2)
    one = "bench-cluster-one"
    cluster.evalsite("import", str(write_set(tmp / f"{one}.jsonl", 1)), "--name", one)
    latencies = []
    for _ in range(5):
        got = run(cluster, agents, one, "--variant", "sleepy")
        latencies.append(got["shards"][0][0] * 1000)
    print(f"  queue latency (enqueued -> claimed by an idle worker): median {statistics.median(latencies):.0f} ms")
    empty = run(cluster, agents, one, "--variant", "sleepy")
    print(f"  one-case shard, no-op target: {empty['shards'][0][1] * 1000:.0f} ms claimed -> done (per-shard overhead)")
    workers_up(cluster, 4)
    got = run(cluster, agents, name, "--variant", "sleepy", "--concurrency", "50", "--shard-size", "250")
    per_shard = statistics.median(s[1] for s in got["shards"])
    print(
        f"  no-op target, 4 workers: {got['rate']:,.0f} cases/s stored "
        f"({got['n_done']:,} in {got['elapsed_s']:.2f} s); "
        f"a 250-case shard takes {per_shard * 1000:.0f} ms median"
    )
    cluster.stop_workers()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions of scaling and CPU-bound (3)")
    parser.add_argument("--workers", default="1,2,4", help="worker counts of the scaling runs (1,2,4)")
    parser.add_argument(
        "--compare",
        action="append",
        default=[],
        type=Path,
        help="another checkout (e.g. an older commit exported with git archive) whose workers and CLI "
        "run the scaling runs too, interleaved with this one's (repeatable)",
    )
    parser.add_argument("--skip", default="", help="comma-separated: scaling,kill,cpu,overhead")
    opts = parser.parse_args()
    skip = set(filter(None, opts.skip.split(",")))
    import tempfile

    started = time.monotonic()
    print(machine_line())
    cluster = Cluster(env=LEASE)
    try:
        with tempfile.TemporaryDirectory() as folder:
            tmp = Path(folder)
            slow = write_agents(tmp / "sleep100", delay_s=0.1)
            noop = write_agents(tmp / "noop")
            cpu = write_agents(tmp / "cpu5", cpu_ms=5.0)
            name = "bench-cluster"
            cluster.evalsite("import", str(write_set(tmp / f"{name}.jsonl", opts.cases)), "--name", name)
            print(f"local cluster: PostgreSQL + Redis ({cluster.folder}); RQ workers; evalsite eval --executor queue")
            if "scaling" not in skip:
                counts = tuple(int(w) for w in opts.workers.split(","))
                scaling(cluster, slow, name, opts.cases, opts.reps, counts, (None, *opts.compare))
            if "kill" not in skip:
                kills(cluster, slow, name, opts.cases, opts.kills)
            if "cpu" not in skip:
                cpu_bound(cluster, cpu, tmp, opts.reps)
            if "overhead" not in skip:
                overhead(cluster, noop, name, tmp)
    finally:
        cluster.close()
    print(f"\n(bench took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
