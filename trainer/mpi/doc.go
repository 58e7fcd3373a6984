// Package mpi runs the trainer's collectives over MPI between processes:
// Open MPI's libmpi.so.40 (Debian's libopenmpi3), loaded at run time with
// github.com/ebitengine/purego, so there is no cgo and no mpi.h at build
// time and a binary built without MPI runs where it is installed.
//
// Open MPI's predefined handles are the addresses of global objects
// (MPI_COMM_WORLD is &ompi_mpi_comm_world, MPI_FLOAT &ompi_mpi_float,
// MPI_SUM &ompi_mpi_op_sum), so the bindings resolve them with Dlsym like
// the functions. Other MPI implementations (MPICH's integer handles) are a
// different ABI and are refused with ErrSymbol.
//
// Comm implements parallel.Collective over MPI_COMM_WORLD for buffers of
// any tensor.Device, staged through host memory. Start the processes with
// mpirun; a process started alone is a world of one.
package mpi
