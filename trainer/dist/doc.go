// Package dist makes one trainer process one rank of a multi-process job,
// as torch.distributed.init_process_group does: the rank and world come
// from the launcher's environment (FromEnv: Open MPI's mpirun or
// torchrun-style RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT),
// the collectives from an existing engine loaded at run time (MPI for CPU
// devices: InitMPI; NCCL for GPUs: trainer/nccl, with its unique id handed
// out by Rendezvous), and a failure monitor watches the ranks.
//
// Rendezvous. Under mpirun, MPI is the rendezvous: the launcher wires the
// ranks together, and rank 0 broadcasts over MPI the one thing the monitor
// needs (its address). Without MPI (torchrun, or NCCL under any launcher)
// the smallest correct rendezvous is torch's env:// semantics reduced to
// what NCCL needs: rank 0 listens on MASTER_ADDR:MASTER_PORT, every other
// rank dials it (retrying until rank 0 is up or JoinTimeout passes) and
// says who it is, and once all world−1 ranks are in, rank 0 answers each
// with the blob (NCCL's 128-byte unique id). No key-value store: one value
// from one writer needs none. Duplicate ranks or a different world size
// fail the rendezvous with both named.
//
// Failure. The rendezvous connections stay open as a star around rank 0
// (one connection per rank; rank 0 relays). A rank killed by any signal
// has its sockets closed by its kernel, so its peer notices in
// milliseconds; a node that vanishes is noticed after DeadAfter without
// heartbeats; a rank that fails with an error says why before leaving.
// Every rank then knows which rank failed (a *PeerError). Collectives
// cannot be interrupted from outside in MPI (NCCL has ncclCommAbort), so
// the monitor calls Options.OnFailure: the trainer command exits there,
// naming the rank, if the blocked collective has not returned within a
// moment. A timeout around every collective would need to exceed the
// slowest legitimate wait (rank 0 alone evaluating, writing a checkpoint)
// and still could not say which rank died; MPI_ERRORS_RETURN (set) helps
// only where the transport notices, which shared memory does not.
package dist
