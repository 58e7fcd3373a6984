package imagedec

import (
	"errors"
	"strings"

	"github.com/ebitengine/purego"
)

// dlopenFirst dlopens the first of names that loads (RTLD_NOW: every
// symbol resolved now, so a broken library fails here rather than in a
// decode; RTLD_GLOBAL, as the library's own plugins and dependants may
// expect) and returns its handle and name. Its error lists every
// attempt's message, in order.
func dlopenFirst(names []string) (handle uintptr, name string, err error) {
	if len(names) == 0 {
		return 0, "", errors.New("no library names to try")
	}
	errs := make([]string, 0, len(names))
	for _, n := range names {
		h, err := purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, n, nil
		}
		errs = append(errs, err.Error())
	}
	return 0, "", errors.New(strings.Join(errs, "; "))
}

// dlsym returns the address of name in the library, false when the
// library does not export it. Callers check every symbol before binding
// anything: purego.RegisterFunc panics on a missing one.
func dlsym(handle uintptr, name string) (uintptr, bool) {
	p, err := purego.Dlsym(handle, name)
	return p, err == nil && p != 0
}
