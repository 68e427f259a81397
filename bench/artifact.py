#!/usr/bin/env python3
"""Job artifacts against bundled programs, on one standalone cluster in the same run.

Starts a JobManager and TaskManagers on loopback and runs a job at parallelism 2, alternately as
the program bundled into `sluice` and as the same program from a job artifact
(integration/test-job registers the bundled examples too), so the only difference is where the
code comes from and that the artifact's subtasks run in worker processes. The jobs:

- `stream-sum` (`--rate 0 --records N`) on one TaskManager of 2 slots;
- `shuffle` (`--records N --keys 1024`, the key_by exchange) on two TaskManagers of one slot
  each, so that about half of the records cross between them; a consumer reaches a worker's
  partitions through its TaskManager's data port, which redirects it to the worker's.

For each run it reads the TaskManagers' CPU time from /proc, their children's included (the
workers are the TaskManagers' children; the script waits until the idle workers have ended and
been reaped). It also measures the submission latency of the artifact (upload + run to every
task RUNNING, `stream-sum --rate 1000`) and the resident memory of a worker beside its
TaskManager.

Usage: bench/artifact.py [--job stream-sum|shuffle] [--records N] [--runs R]
       (binaries from $CARGO_TARGET_DIR/debug)
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid, children=True):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    own = int(fields[11]) + int(fields[12])
    kids = int(fields[13]) + int(fields[14]) if children else 0
    return (own + kids) / TICK


def rss_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def children(pid):
    # Each thread lists the children it started; the worker is started by a runtime thread.
    kids = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for task in tasks:
        try:
            kids += [int(p) for p in open(f"/proc/{pid}/task/{task}/children").read().split()]
        except OSError:
            pass
    return kids


def get(rest, path):
    with urllib.request.urlopen(f"http://{rest}{path}", timeout=10) as r:
        return json.load(r)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=40_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--job", choices=["stream-sum", "shuffle"], default="stream-sum")
    args = parser.parse_args()
    taskmanagers, slots = (1, 2) if args.job == "stream-sum" else (2, 1)
    job_args = (["--rate", "0", "--records", str(args.records)] if args.job == "stream-sum"
                else ["--records", str(args.records), "--keys", "1024"])
    target = os.environ.get("CARGO_TARGET_DIR", "/var/tmp/sluice-target")
    sluice = os.path.join(target, "debug", "sluice")
    artifact = os.path.join(target, "debug", "sluice-test-job")
    for binary in (sluice, artifact):
        if not os.path.isfile(binary):
            sys.exit(f"{binary} is missing: cargo build --workspace --bins")
    work = tempfile.mkdtemp(prefix="sluice-artifact-bench-")
    rest_port, rpc_port = free_port(), free_port()
    rest = f"127.0.0.1:{rest_port}"
    os.makedirs(f"{work}/conf")
    with open(f"{work}/conf/config.yaml", "w") as f:
        f.write(
            f"rest.port: {rest_port}\nrest.address: 127.0.0.1\nrest.bind-address: 127.0.0.1\n"
            f"jobmanager.rpc.address: 127.0.0.1\njobmanager.rpc.port: {rpc_port}\n"
            "jobmanager.bind-host: 127.0.0.1\ntaskmanager.host: 127.0.0.1\n"
            f"taskmanager.bind-host: 127.0.0.1\ntaskmanager.numberOfTaskSlots: {slots}\n"
            "security.cluster.secret: bench-secret-0123456789abcdef\n"
            # The test job is built with the workspace's profile, line tables included: over
            # the default upload limit of 100 MiB.
            "rest.server.max-content-length: 512mb\n"
        )
    base = [sluice, "--config-dir", f"{work}/conf"]
    log = open(f"{work}/cluster.log", "w")
    jm = subprocess.Popen(base + ["jobmanager"], stdout=log, stderr=log)
    time.sleep(1)
    tms = [subprocess.Popen(base + ["taskmanager"], stdout=log, stderr=log)
           for _ in range(taskmanagers)]
    tm = tms[0]

    def tm_cpu():
        return sum(cpu_seconds(t.pid) for t in tms)

    def any_worker():
        return any(children(t.pid) for t in tms)

    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                if get(rest, "/overview")["slots-total"] == 2:
                    break
            except OSError:
                pass
            time.sleep(0.2)

        def run(program_args):
            before = tm_cpu()
            start = time.time()
            subprocess.run(
                base + ["run", "-m", rest, "-p", "2"] + program_args + job_args,
                check=True, stdout=subprocess.DEVNULL,
            )
            wall = time.time() - start
            # An idle worker ends after its linger; its CPU then counts as its TM's children's.
            while any_worker():
                time.sleep(0.2)
            return wall, tm_cpu() - before

        results = {"bundled": [], "artifact": []}
        for _ in range(args.runs):
            results["bundled"].append(run([args.job]))
            results["artifact"].append(run(["-c", args.job, artifact]))
        print(f"{args.job} {' '.join(job_args)}, -p 2, {taskmanagers} TaskManager(s) of {slots} "
              f"slot(s), {args.runs} runs each")
        print(f"{'':10} {'wall s':>8} {'TM CPU s':>9} {'records per TM CPU s':>22}")
        for name, runs in results.items():
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            print(f"{name:10} {wall:8.2f} {cpu:9.2f} {args.records / cpu / 1e6:20.2f} M")
        ratio = statistics.median(c for _, c in results["artifact"]) / statistics.median(
            c for _, c in results["bundled"])
        print(f"artifact / bundled CPU per record: {ratio:.3f}")

        # Submission latency: upload + run until every task is RUNNING.
        latencies = []
        for _ in range(args.runs):
            start = time.time()
            out = subprocess.run(
                base + ["run", "-m", rest, "-d", "-p", "2", "-c", "stream-sum", artifact,
                        "--rate", "1000"],
                check=True, capture_output=True, text=True,
            ).stdout
            job = out.split("JobID")[1].split()[0]
            while True:
                j = get(rest, f"/jobs/{job}")
                if j["state"] == "RUNNING" and all(v["status"] == "RUNNING" for v in j["vertices"]):
                    break
                time.sleep(0.01)
            latencies.append(time.time() - start)
            workers = [w for t in tms for w in children(t.pid)]
            worker_rss = sum(rss_kib(w) for w in workers) / max(len(workers), 1)
            tm_rss = rss_kib(tm.pid)
            subprocess.run(base + ["cancel", "-m", rest, job], check=True, stdout=subprocess.DEVNULL)
            while any_worker():
                time.sleep(0.2)
        size = os.path.getsize(artifact) / 2**20
        print(f"submission of a {size:.0f} MiB artifact to all tasks RUNNING: median "
              f"{statistics.median(latencies):.2f} s ({', '.join(f'{l:.2f}' for l in latencies)})")
        print(f"resident memory while it ran (stream-sum at 1000 records/s): a worker {worker_rss / 1024:.0f} MiB, "
              f"its TaskManager {tm_rss / 1024:.0f} MiB")
    finally:
        for t in tms:
            t.terminate()
        jm.terminate()
        for t in tms:
            t.wait()
        jm.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
