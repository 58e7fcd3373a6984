package mpi

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
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
	var errs []string
	for _, n := range names {
		// RTLD_GLOBAL: Open MPI's plugins resolve libmpi's symbols globally.
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		l := &Lib{path: n, handle: h}
		if err := l.bind(); err != nil {
			purego.Dlclose(h)
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("%w: tried %s (install Open MPI: libopenmpi3): %s", ErrNotFound,
		strings.Join(names, ", "), strings.Join(errs, "; "))
}

// bind checks every symbol with Dlsym before registering it, because
// purego.RegisterFunc panics on a missing one.
func (l *Lib) bind() error {
	funcs := []struct {
		fptr any
		name string
	}{
		{&l.initThread, "MPI_Init_thread"}, {&l.initialized, "MPI_Initialized"},
		{&l.finalized, "MPI_Finalized"}, {&l.finalize, "MPI_Finalize"},
		{&l.commRank, "MPI_Comm_rank"}, {&l.commSize, "MPI_Comm_size"},
		{&l.setErrh, "MPI_Comm_set_errhandler"}, {&l.allreduce, "MPI_Allreduce"},
		{&l.reduce, "MPI_Reduce"}, {&l.bcast, "MPI_Bcast"}, {&l.errorString, "MPI_Error_string"},
	}
	for _, f := range funcs {
		p, err := l.sym(f.name)
		if err != nil {
			return err
		}
		if err := register(f.fptr, p, f.name); err != nil {
			return err
		}
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
	p, err := purego.Dlsym(l.handle, name)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("%w %s in %s", ErrSymbol, name, l.path)
	}
	return p, nil
}

// register wraps purego.RegisterFunc, turning its panic (a Go signature it
// cannot map) into an error.
func register(fptr any, p uintptr, name string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("mpi: binding %s: %v", name, r)
		}
	}()
	purego.RegisterFunc(fptr, p)
	return nil
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
