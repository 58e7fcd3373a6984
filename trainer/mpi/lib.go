package mpi

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// Names are the library files Load tries, in order: Open MPI's ABI
// (Debian's libopenmpi3 ships libmpi.so.40).
var Names = []string{"libmpi.so.40", "libmpi.so"}

var (
	// ErrNotFound reports that no MPI library could be loaded.
	ErrNotFound = errors.New("mpi: library not found")
	// ErrSymbol reports a library without a function or handle the
	// bindings need (not Open MPI, or too old).
	ErrSymbol = errors.New("mpi: missing symbol")
)

// Error is a failed MPI call: its name, error code and MPI's message.
type Error struct {
	Op   string
	Code int32
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("mpi: %s: %s (error %d)", e.Op, e.Msg, e.Code)
	}
	return fmt.Sprintf("mpi: %s: error %d", e.Op, e.Code)
}

// Open MPI constants (mpi.h).
const (
	threadSerialized = 2 // MPI_THREAD_SERIALIZED
	maxErrorString   = 256
)

// inPlace is MPI_IN_PLACE, ((void *) 1) in Open MPI: the send-buffer
// arguments are uintptr so that it can be passed.
const inPlace uintptr = 1

// Lib is a loaded libmpi: the bound functions and Open MPI's predefined
// handles, which are the addresses of global objects (MPI_COMM_WORLD is
// &ompi_mpi_comm_world, and so on).
type Lib struct {
	path   string
	handle uintptr

	initThread  func(argc, argv unsafe.Pointer, required int32, provided *int32) int32
	initialized func(flag *int32) int32
	finalized   func(flag *int32) int32
	finalize    func() int32
	commRank    func(comm uintptr, rank *int32) int32
	commSize    func(comm uintptr, size *int32) int32
	setErrh     func(comm, errh uintptr) int32
	allreduce   func(send uintptr, recv unsafe.Pointer, count int32, dtype, op, comm uintptr) int32
	reduce      func(send uintptr, recv unsafe.Pointer, count int32, dtype, op uintptr, root int32, comm uintptr) int32
	bcast       func(buf unsafe.Pointer, count int32, dtype uintptr, root int32, comm uintptr) int32
	errorString func(code int32, s *byte, n *int32) int32

	world, float, byte_, sum, errorsReturn uintptr
}

// Load opens libmpi: path when not empty (a file), else Names through the
// dynamic loader's search path. A missing library is an error wrapping
// ErrNotFound, a missing symbol one wrapping ErrSymbol; it never panics.
func Load(path string) (*Lib, error) {
	names := Names
	if path != "" {
		names = []string{path}
	}
	h, n, err := dynlib.OpenFirst(names)
	if err != nil {
		return nil, fmt.Errorf("%w: tried %s (install Open MPI: libopenmpi3): %v", ErrNotFound, strings.Join(names, ", "), err)
	}
	l := &Lib{path: n, handle: h}
	if err := l.bind(); err != nil {
		purego.Dlclose(h)
		return nil, err
	}
	return l, nil
}

// bind checks every symbol with Dlsym before registering it, because
// purego.RegisterFunc panics on a missing one.
func (l *Lib) bind() error {
	if err := dynlib.Bind(l.handle, []dynlib.Func{
		{Ptr: &l.initThread, Name: "MPI_Init_thread"}, {Ptr: &l.initialized, Name: "MPI_Initialized"},
		{Ptr: &l.finalized, Name: "MPI_Finalized"}, {Ptr: &l.finalize, Name: "MPI_Finalize"},
		{Ptr: &l.commRank, Name: "MPI_Comm_rank"}, {Ptr: &l.commSize, Name: "MPI_Comm_size"},
		{Ptr: &l.setErrh, Name: "MPI_Comm_set_errhandler"}, {Ptr: &l.allreduce, Name: "MPI_Allreduce"},
		{Ptr: &l.reduce, Name: "MPI_Reduce"}, {Ptr: &l.bcast, Name: "MPI_Bcast"}, {Ptr: &l.errorString, Name: "MPI_Error_string"},
	}); err != nil {
		return l.bindError(err)
	}
	for _, h := range []struct {
		dst  *uintptr
		name string
	}{
		{&l.world, "ompi_mpi_comm_world"}, {&l.float, "ompi_mpi_float"}, {&l.byte_, "ompi_mpi_byte"},
		{&l.sum, "ompi_mpi_op_sum"}, {&l.errorsReturn, "ompi_mpi_errors_return"},
	} {
		p, err := l.sym(h.name)
		if err != nil {
			return fmt.Errorf("%w (the bindings need Open MPI's ABI)", err)
		}
		*h.dst = p
	}
	return nil
}

func (l *Lib) sym(name string) (uintptr, error) {
	p, err := dynlib.Sym(l.handle, name)
	if err != nil {
		return 0, l.bindError(err)
	}
	return p, nil
}

// bindError names a missing symbol under ErrSymbol.
func (l *Lib) bindError(err error) error {
	var me *dynlib.MissingError
	if errors.As(err, &me) {
		return fmt.Errorf("%w %s in %s", ErrSymbol, me.Name, l.path)
	}
	return fmt.Errorf("mpi: %w", err)
}

// Path returns the file the library was loaded from.
func (l *Lib) Path() string { return l.path }

// check turns an MPI return code into an *Error.
func (l *Lib) check(op string, code int32) error {
	if code == 0 {
		return nil
	}
	buf := make([]byte, maxErrorString)
	var n int32
	e := &Error{Op: op, Code: code}
	if l.errorString(code, &buf[0], &n) == 0 && n > 0 && int(n) <= len(buf) {
		e.Msg = string(buf[:n])
	}
	return e
}
