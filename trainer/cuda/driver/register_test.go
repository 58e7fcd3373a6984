package driver

import (
	"github.com/ebitengine/purego"
	"reflect"
	"testing"
	"unsafe"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// Every binding's Go signature must be one purego can call: register each
// function field against a real symbol (never calling it), so a signature
// purego rejects fails here instead of at run time on a GPU machine.
func TestSignaturesRegister(t *testing.T) {
	l, err := open("libc", Options{}, []string{"libc.so.6"}, nil)
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	defer l.close()
	p, err := dlsymAddr(l, "getpid") // any code address will do: nothing is called
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range []any{&CUDA{}, &NVRTC{}, &CUBLAS{}} {
		s := reflect.ValueOf(v).Elem()
		for i := 0; i < s.NumField(); i++ {
			f := s.Field(i)
			if f.Kind() != reflect.Func {
				continue
			}
			fp := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Interface()
			if err := dynlib.Register(fp, p, s.Type().Field(i).Name); err != nil {
				t.Errorf("%T.%s: %v", v, s.Type().Field(i).Name, err)
			}
			n++
		}
	}
	if n < 40 {
		t.Fatalf("registered only %d bindings", n)
	}
}

// dlsymAddr returns the address of name in l.
func dlsymAddr(l *lib, name string) (uintptr, error) {
	return purego.Dlsym(l.handle, name)
}
