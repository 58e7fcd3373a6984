// Package nccl runs the trainer's collectives on NVIDIA GPUs through NCCL
// (libnccl.so.2), loaded at run time with github.com/ebitengine/purego
// like the CUDA libraries of trainer/cuda/driver: no cgo, no nccl.h. Comm
// implements parallel.Collective on a trainer/cuda device's stream.
//
// A job's ranks share one ncclUniqueId made by rank 0 (Lib.NewUniqueID);
// trainer/dist's Rendezvous hands it out (torch's env:// semantics on
// MASTER_ADDR:MASTER_PORT) and InitNCCL ties it together with the failure
// monitor, which calls Comm.Abort (ncclCommAbort) when a rank dies.
//
// Verified without a GPU: loading errors, every binding's signature
// (ncclUniqueId passed by value included) and the arguments each call
// passes, against a stand-in library built with the system C compiler.
// Not verified here: real NCCL communication on GPUs.
package nccl
