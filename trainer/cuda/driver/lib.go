package driver

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/ebitengine/purego"

	"github.com/loaderd/loaderd/trainer/internal/dynlib"
)

// ErrNotFound reports a library that none of the searched paths provides.
// LibError wraps it, so errors.Is(err, ErrNotFound) tests for "no CUDA".
var ErrNotFound = errors.New("library not found")

// ErrSymbol reports a library that lacks a function the bindings need (a
// driver older than the bindings, or the wrong file).
var ErrSymbol = errors.New("missing symbol")

// LibError says which library could not be loaded and where it was sought.
type LibError struct {
	What  string   // "CUDA driver", "NVRTC", "cuBLAS"
	Names []string // file names tried, in order
	Dirs  []string // directories searched before the loader's own path
	Err   error    // ErrNotFound, or the wrapped dlopen/ErrSymbol error
	// LoaderPath is set when the dynamic loader's own path was searched too.
	LoaderPath bool
}

func (e *LibError) Error() string {
	if errors.Is(e.Err, ErrNotFound) && len(e.Names) > 0 {
		s := fmt.Sprintf("driver: no %s: %s not found in %s", e.What, e.Names[0], strings.Join(e.Dirs, ", "))
		if e.LoaderPath {
			s += " or the loader path"
		}
		if len(e.Names) > 1 {
			s += " (also tried " + strings.Join(e.Names[1:], ", ") + ")"
		}
		if e.Err != ErrNotFound {
			s += ": " + e.Err.Error()
		}
		return s
	}
	return fmt.Sprintf("driver: %s: %v", e.What, e.Err)
}

func (e *LibError) Unwrap() error { return e.Err }

// Options tells the loaders where to look first. The zero value searches
// CUDA_HOME, the Debian multiarch directory, /usr/local/cuda and then the
// dynamic loader's own path (ldconfig cache, LD_LIBRARY_PATH).
type Options struct {
	// Path is a library file or a directory holding it (a command-line
	// flag); when set it is tried first.
	Path string
	// Exclusive limits the search to Path (no standard directories, no
	// loader path): for a flag that must be obeyed, and for tests.
	Exclusive bool
}

// searchDirs returns the directories to try, most specific first.
func searchDirs(o Options) []string {
	var dirs []string
	add := func(d string) {
		if d == "" {
			return
		}
		for _, x := range dirs {
			if x == d {
				return
			}
		}
		dirs = append(dirs, d)
	}
	if o.Path != "" {
		if fi, err := os.Stat(o.Path); err == nil && fi.IsDir() {
			add(o.Path)
		} else {
			add(filepath.Dir(o.Path))
		}
	}
	if o.Exclusive {
		return dirs
	}
	for _, env := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if h := os.Getenv(env); h != "" {
			add(filepath.Join(h, "lib64"))
			add(filepath.Join(h, "lib"))
		}
	}
	add("/usr/lib/x86_64-linux-gnu")
	add("/usr/lib/aarch64-linux-gnu")
	add("/usr/lib64")
	add("/usr/local/cuda/lib64")
	add("/usr/local/nvidia/lib64") // where container toolkits mount the driver
	return dirs
}

// candidates returns the paths to try for a library with the given file
// names; glob patterns (containing '*') are expanded in each directory,
// newest version first.
func candidates(o Options, names []string) []string {
	var out []string
	if o.Path != "" {
		if fi, err := os.Stat(o.Path); err == nil && !fi.IsDir() {
			out = append(out, o.Path)
		}
	}
	for _, d := range searchDirs(o) {
		for _, n := range names {
			if !strings.Contains(n, "*") {
				p := filepath.Join(d, n)
				if _, err := os.Stat(p); err == nil {
					out = append(out, p)
				}
				continue
			}
			m, _ := filepath.Glob(filepath.Join(d, n))
			sort.Sort(sort.Reverse(sort.StringSlice(m)))
			for _, p := range m {
				if versioned(p) {
					out = append(out, p)
				}
			}
		}
	}
	if o.Exclusive {
		return out
	}
	// Bare names last: dlopen then searches LD_LIBRARY_PATH and the ldconfig cache.
	for _, n := range names {
		if !strings.Contains(n, "*") {
			out = append(out, n)
		}
	}
	out = append(out, ldconfigNames(names)...)
	return out
}

// versioned reports whether a glob match ends in ".so" plus numeric
// version parts (libx.so.11.8.89, not libx.so.11.bak).
func versioned(p string) bool {
	i := strings.LastIndex(p, ".so")
	return i >= 0 && strings.Trim(p[i+3:], "0123456789.") == ""
}

// ldconfigNames returns cached library paths whose base name matches one of
// names (globs allowed); ldconfig absent gives none.
func ldconfigNames(names []string) []string {
	if runtime.GOOS != "linux" {
		return nil
	}
	bin, err := exec.LookPath("ldconfig")
	if err != nil {
		if _, e := os.Stat("/sbin/ldconfig"); e != nil {
			return nil
		}
		bin = "/sbin/ldconfig"
	}
	outb, err := exec.Command(bin, "-p").Output()
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(outb), "\n") {
		i := strings.LastIndex(line, "=> ")
		if i < 0 {
			continue
		}
		p := strings.TrimSpace(line[i+3:])
		for _, n := range names {
			if ok, _ := filepath.Match(n, filepath.Base(p)); ok {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// lib is one dlopen'ed library.
type lib struct {
	what   string
	path   string
	handle uintptr
}

// open loads the first candidate that dlopen accepts.
func open(what string, o Options, names []string, skip func(string) bool) (*lib, error) {
	var last error
	for _, p := range candidates(o, names) {
		if skip != nil && skip(p) {
			continue
		}
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return &lib{what: what, path: p, handle: h}, nil
		}
		if strings.Contains(p, "/") {
			last = err // a file that exists but does not load is worth reporting
		}
	}
	e := &LibError{What: what, Names: names, Dirs: searchDirs(o), Err: ErrNotFound, LoaderPath: !o.Exclusive}
	if last != nil {
		e.Err = fmt.Errorf("%w (last dlopen error: %v)", ErrNotFound, last)
	}
	return nil, e
}

// bind registers every function after checking it exists (dynlib.Bind).
// A missing one is wrapped in ErrSymbol.
func (l *lib) bind(funcs []dynlib.Func) error {
	err := dynlib.Bind(l.handle, funcs)
	var me *dynlib.MissingError
	if errors.As(err, &me) {
		return &LibError{What: l.what, Err: fmt.Errorf("%w %s in %s", ErrSymbol, me.Name, l.path)}
	}
	if err != nil {
		return &LibError{What: l.what, Err: fmt.Errorf("driver: %w", err)}
	}
	return nil
}

func (l *lib) close() error {
	if l == nil || l.handle == 0 {
		return nil
	}
	err := purego.Dlclose(l.handle)
	l.handle = 0
	return err
}
