"""`kiln bench`: run the benchmark workloads on Kiln and its peers and print a table."""
from __future__ import annotations

import datetime
import json
import os
import platform


def add_parser(sub) -> None:
    bench = sub.add_parser("bench", help="benchmark Kiln against XLA:CPU and IREE (on demand)")
    bench.add_argument("workloads", nargs="*",
                       help="workload names (default: all); with --compile-time, program names")
    bench.add_argument("--list", action="store_true", help="list the workloads and exit")
    bench.add_argument("--peers", default="kiln,xla,iree,numpy",
                       help="comma-separated peers to run (kiln is always included)")
    bench.add_argument("--budget", type=float, default=3.0,
                       help="seconds of timed calls per workload (all peers together)")
    bench.add_argument("--min-rounds", type=int, default=5,
                       help="timed rounds per workload at least, whatever the budget")
    bench.add_argument("--json", nargs="?", const="-",
                       help="also write the results as JSON here (`kiln bench models --json` "
                            "alone: print the JSON instead of the table)")
    # `kiln bench models`: real models from keras / keras_hub / flax (bench/models.py)
    bench.add_argument("--pjrt", action="store_true",
                       help="add Kiln through JAX's PJRT plugin (the workloads jitted on the "
                            "kiln device) as peer 'pjrt', with its ratio to XLA (pjrt/xla)")
    bench.add_argument("--only", nargs="+", metavar="NAME",
                       help="models: run only these models (`kiln bench models --list` names them)")
    bench.add_argument("--load", action="store_true",
                       help="models: time again beside a competing busy-loop process (one core) "
                            "and report each compiler's slowdown")
    bench.add_argument("--compile-time", action="store_true",
                       help="measure compile time instead: Kiln against XLA:CPU on JAX's exports "
                            "of the workloads and of the test programs (cold, interleaved)")
    bench.add_argument("--collectives", action="store_true",
                       help="measure a large all_reduce between 2 devices instead: Kiln (threads, "
                            "mpiexec) against JAX (threads, gloo), one run")
    bench.add_argument("--memory", action="store_true",
                       help="measure memory instead: what a call adds to the resident size, Kiln "
                            "beside XLA:CPU, each in a fresh process (default: the workloads "
                            "with 8 MB or more of inputs and outputs)")
    bench.add_argument("--size-mb", type=float, default=64.0,
                       help="--collectives: the all_reduce's size in MB")
    bench.add_argument("--rounds", type=int, default=3,
                       help="--compile-time: compiles of each program per compiler (median)")
    bench.add_argument("--opt-level", type=int, choices=(0, 1, 2, 3),
                       help="LLVM optimization level for Kiln (default: Kiln's)")
    bench.add_argument("--target", default="cpu",
                       help="Kiln's target: cpu (default), gpu (needs a CUDA device: calls "
                            "include the copies to and from it; the xla peer runs on jax's "
                            "default backend) or gpu-emulator; with --compile-time, any "
                            "target, no device needed")


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
    if args.workloads[:1] == ["models"]:
        return run_models(args)
    if args.compile_time:
        return run_compile_time(args)
    if args.collectives:
        from ..bench import collectives
        print(f"kiln bench --collectives: {machine()['cpu']}, {machine()['cores']} cores, "
              f"{machine()['date']}", flush=True)
        results = collectives.measure(args.size_mb)
        print(collectives.table(results))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": machine(), **results}, f, indent=1)
        return 0
    if args.memory:
        return run_memory(args)
    if args.list:
        for w in WORKLOADS:
            print(f"{w.name:12} {w.note}")
        return 0
    _check_target_runs_here(args.target)
    wanted = {"kiln", *[p.strip() for p in args.peers.split(",") if p.strip()]}
    if args.pjrt:
        wanted.add("pjrt")
    peers = [p for p in peer_mod.all_peers() if p.name in wanted]
    options = _kiln_options(args)
    if options:
        peers = [peer_mod.KilnPeer(**options) if p.name == "kiln" else p for p in peers]
    names = [p.name for p in peers]
    info = machine()
    print(f"kiln bench: {info['cpu']}, {info['cores']} cores, {info['date']}"
          + (f"; Kiln's target: {args.target}" if args.target != "cpu" else ""), flush=True)
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


def _kiln_options(args) -> dict:
    """kiln.compile options from the command line (none: Kiln's defaults)."""
    options = {} if args.opt_level is None else {"opt_level": args.opt_level}
    if args.target != "cpu":
        options["target"] = args.target
    return options


def _check_target_runs_here(target: str) -> None:
    """Timing calls on the GPU needs a CUDA device: without one, say so before compiling
    anything (compile times need none: --compile-time)."""
    from ..errors import KilnError
    from ..targets import get_target
    get_target(target)  # an unknown target: its own error
    if target == "gpu":
        from ..runtime.cuda import no_device_reason
        reason = no_device_reason()
        if reason is not None:
            raise KilnError(f"kiln bench --target gpu: {reason}",
                            hint="run it where a GPU is; `kiln bench --compile-time --target "
                                 "gpu` and `--target gpu-emulator` need none")


def run_compile_time(args) -> int:
    from ..bench import compile_time
    selected = compile_time.programs(args.workloads)
    if args.list:
        for p in selected:
            print(p.name)
        return 0
    options = _kiln_options(args)
    info = machine()
    print(f"kiln bench --compile-time: {info['cpu']}, {info['cores']} cores, {info['date']}; "
          f"{len(selected)} programs, {args.rounds} round(s), KILN_CACHE=0"
          + (f", Kiln's target: {args.target}" if args.target != "cpu" else ""), flush=True)
    results = compile_time.run(selected, rounds=args.rounds, kiln_options=options,
                               log=lambda s: print(s, flush=True))
    print()
    print(compile_time.table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(compile_time.to_json(results, info, args.rounds, options), f, indent=1)
    return 0


def run_memory(args) -> int:
    from ..bench import memory
    from ..bench.workloads import by_name
    selected = by_name(args.workloads) if args.workloads else memory.big(by_name(None))
    info = machine()
    print(f"kiln bench --memory: {info['cpu']}, {info['cores']} cores, {info['date']}; "
          f"{len(selected)} workloads, a fresh process per workload and peer", flush=True)
    results = []
    for w in selected:
        pair = (memory.measure(w, "kiln"), memory.measure(w, "xla"))
        for r in pair:
            shown = r.get("error") or f"first call {r['first_call_mb']:.1f} MB"
            print(f"[{w.name}] {r['peer']}: {shown}", flush=True)
        results.append(pair)
    print()
    print(memory.table(results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "memory": [{"kiln": k, "xla": x} for k, x in results]},
                      f, indent=1)
    return 0


def run_models(args) -> int:
    """`kiln bench models [--only NAME...] [--load] [--json [PATH]]` (bench/models.py)."""
    import sys
    from ..bench import model_zoo, models
    from ..errors import KilnError
    if args.workloads[1:]:
        raise KilnError(f"kiln bench models takes model names through --only, not "
                        f"{' '.join(args.workloads[1:])!r}",
                        hint="kiln bench models --only " + " ".join(args.workloads[1:]))
    selected = model_zoo.by_name(args.only)
    if args.list:
        for m in model_zoo.MODELS:
            print(f"{m.name:15} {m.note}")
        return 0
    to_stdout = args.json == "-"
    say = (lambda s: print(s, file=sys.stderr, flush=True)) if to_stdout else \
        (lambda s: print(s, flush=True))
    info = machine()
    load_text, _ = models.load_line()
    say(f"kiln bench models: {info['cpu']}, {info['cores']} cores, {info['date']}; {load_text}")
    rows = models.run(selected, budget_s=args.budget, load=args.load, log=say)
    data = models.to_json(rows, {**info, "load": load_text})
    if to_stdout:
        print(json.dumps(data, indent=1))
        return 0
    print()
    print(models.table(rows, load=args.load))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(data, f, indent=1)
    return 0
