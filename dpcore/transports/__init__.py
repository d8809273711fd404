"""Transports between nodes: dpcore's own algorithms over MPI point-to-point.

- mpi.MpiTransport: every collective among all ranks over MPI (DPCORE_TRANSPORT=mpi, or the
  fallback when nodes differ in size).
- hierarchical.HierarchicalTransport: ranks on several nodes (or DPCORE_NODE_SIZE virtual
  nodes): shared memory inside each node, an MPI ring between nodes.

Both offer the raw calls of dpcore._C.ShmComm (run, submit, exchange_counts, drain), so the
Communicator treats every backend alike. MPI only carries bytes; the schedules (ring, chain,
tree) and every reduction (dpcore._C.reduce) are dpcore's.
"""
