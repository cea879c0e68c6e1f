"""Under mpiexec: run an HLO program's devices with per-device arguments, as
test_hlo_forms.py does on threads, and write every device's results (rank 0).

    mpiexec -n RANKS python run_devices_mpi.py PROGRAM.hlo ARGS.npz OUT.npz

ARGS.npz holds `d{device}_{i}`: argument i of device d.
"""
import sys

import numpy as np

import kiln
from kiln.distributed.mpi import world

program, args_path, out_path = sys.argv[1:4]
exe = kiln.compile(open(program).read(), filename=program)
saved = np.load(args_path)
per_device = [[saved[f"d{d}_{i}"] for i in range(6)] for d in range(exe.num_devices)]
results = exe.run_devices(per_device)
if world().COMM_WORLD.Get_rank() == 0:  # every rank holds every device's results
    np.savez(out_path, **{f"d{d}": r[0] for d, r in enumerate(results)})
