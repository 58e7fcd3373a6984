// Package dynlib implements what loaderd's bindings to native libraries
// (CUDA, NCCL, MPI) share: opening the first of several library names
// with purego, and binding Go func variables to C functions only after
// Dlsym has found them, since purego.RegisterFunc panics on a missing
// symbol or a signature it cannot map. Its functions are safe for
// concurrent use.
package dynlib

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ebitengine/purego"
)

// Func binds the Go func variable Ptr points to, to the C function Name.
type Func struct {
	Ptr  any
	Name string
}

// MissingError names a symbol the library does not export.
type MissingError struct{ Name string }

func (e *MissingError) Error() string { return "dynlib: missing symbol " + e.Name }

// OpenFirst dlopens the first of names that loads (RTLD_NOW|RTLD_GLOBAL:
// plugins of MPI and CUDA resolve the library's symbols globally) and
// returns its handle and name. Its error holds every attempt's message.
func OpenFirst(names []string) (handle uintptr, name string, err error) {
	var errs []string
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, n, nil
		}
		errs = append(errs, err.Error())
	}
	return 0, "", errors.New(strings.Join(errs, "; "))
}

// Sym returns the address of name in the library, or a *MissingError.
func Sym(handle uintptr, name string) (uintptr, error) {
	p, err := purego.Dlsym(handle, name)
	if err != nil || p == 0 {
		return 0, &MissingError{Name: name}
	}
	return p, nil
}

// Bind registers every f after checking its symbol exists. A missing
// symbol is a *MissingError; a signature purego cannot map, an error
// naming the function.
func Bind(handle uintptr, funcs []Func) error {
	for _, f := range funcs {
		p, err := Sym(handle, f.Name)
		if err != nil {
			return err
		}
		if err := Register(f.Ptr, p, f.Name); err != nil {
			return err
		}
	}
	return nil
}

// Register is purego.RegisterFunc with its panic turned into an error.
func Register(fptr any, p uintptr, name string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("dynlib: binding %s: %v", name, r)
		}
	}()
	purego.RegisterFunc(fptr, p)
	return nil
}
