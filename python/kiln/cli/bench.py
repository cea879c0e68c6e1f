"""`kiln bench`: run the benchmark workloads on Kiln and its peers and print a table."""
from __future__ import annotations

import datetime
import json
import os
import platform


def add_parser(sub) -> None:
    bench = sub.add_parser("bench", help="benchmark Kiln against XLA:CPU and IREE (on demand)")
    bench.add_argument("workloads", nargs="*", help="workload names (default: all)")
    bench.add_argument("--list", action="store_true", help="list the workloads and exit")
    bench.add_argument("--peers", default="kiln,xla,iree,numpy",
                       help="comma-separated peers to run (kiln is always included)")
    bench.add_argument("--budget", type=float, default=3.0,
                       help="seconds of timed calls per workload (all peers together)")
    bench.add_argument("--min-rounds", type=int, default=5)
    bench.add_argument("--json", help="also write the results as JSON here")


def machine() -> dict:
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "platform": platform.platform(),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def run(args) -> int:
    from ..bench import peers as peer_mod
    from ..bench import runner
    from ..bench.workloads import WORKLOADS, by_name
    if args.list:
        for w in WORKLOADS:
            print(f"{w.name:12} {w.note}")
        return 0
    wanted = {"kiln", *[p.strip() for p in args.peers.split(",") if p.strip()]}
    peers = [p for p in peer_mod.all_peers() if p.name in wanted]
    names = [p.name for p in peers]
    info = machine()
    print(f"kiln bench: {info['cpu']}, {info['cores']} cores, {info['date']}", flush=True)
    for p in peers:
        if p.missing:
            print(f"  {p.name}: missing: {p.missing}", flush=True)
    rows = []
    for w in by_name(args.workloads):
        print(f"[{w.name}] {w.note}", flush=True)
        row = runner.measure(w, peers, budget_s=args.budget, min_rounds=args.min_rounds,
                             log=lambda s: print(s, flush=True))
        for n in names:
            m = row.results[n]
            if m.status == "n/a":
                continue
            shown = f"{m.median_s * 1e3:.2f}ms" if m.median_s else m.status
            print(f"  {n}: {shown}" + (f" ({m.reason})" if m.reason else ""), flush=True)
        rows.append(row)
    print()
    print(runner.table(rows, names))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runner.to_json(rows, names, info), f, indent=1)
    return 0
