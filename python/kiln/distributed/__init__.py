"""Several devices: replicas and partitions as threads of one process or as MPI ranks, the
collectives between them (seed 001), and SPMD programs partitioned across them (seed 002)."""
