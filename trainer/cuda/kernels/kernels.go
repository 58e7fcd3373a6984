package kernels

import (
	"embed"
	"errors"
	"fmt"
	"regexp"
	"sort"
)

//go:embed *.cu
var files embed.FS

// prelude is prepended to every source: the grid loops they share.
//
//go:embed prelude.cuh
var prelude string

// Source is one embedded CUDA C file and the kernels it defines.
type Source struct {
	File    string
	Code    string
	Entries []string // the extern "C" __global__ functions, sorted
}

// ErrCompile reports a source NVRTC rejected or whose PTX lacks a kernel.
var ErrCompile = errors.New("kernels: compile failed")

var globalRE = regexp.MustCompile(`__global__\s+void\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)

// Sources returns every embedded .cu file, sorted by name, with the
// kernels each declares; Code is the file after prelude.cuh.
func Sources() []Source {
	ents, _ := files.ReadDir(".") // embedded: cannot fail
	out := make([]Source, 0, len(ents))
	for _, e := range ents {
		b, _ := files.ReadFile(e.Name())
		s := Source{File: e.Name(), Code: prelude + string(b)}
		for _, m := range globalRE.FindAllStringSubmatch(s.Code, -1) {
			s.Entries = append(s.Entries, m[1])
		}
		sort.Strings(s.Entries)
		out = append(out, s)
	}
	return out
}

// Arch returns the NVRTC virtual architecture for a compute capability,
// e.g. "compute_90" for 9.0.
func Arch(major, minor int) string { return fmt.Sprintf("compute_%d%d", major, minor) }

// SM returns the NVRTC real architecture for a compute capability, e.g.
// "sm_90" for 9.0: what BuildCUBIN compiles for.
func SM(major, minor int) string { return fmt.Sprintf("sm_%d%d", major, minor) }

// Options returns the NVRTC options the kernels are compiled with. Fused
// multiply-adds are off so that results match the CPU engine's rounding.
func Options(arch string) []string {
	return []string{"--gpu-architecture=" + arch, "--fmad=false", "--std=c++14"}
}

// Compiler compiles CUDA C to PTX; *driver.NVRTC implements it.
type Compiler interface {
	Compile(src, name string, opts []string) (ptx []byte, log string, err error)
}

// BinaryCompiler compiles CUDA C to machine code for a real architecture;
// *driver.NVRTC implements it.
type BinaryCompiler interface {
	CompileCUBIN(src, name string, opts []string) (cubin []byte, log string, err error)
}

// BuildCUBIN returns s compiled to machine code for sm (SM's form), from
// cache when present. The device falls back to it when the driver refuses
// PTX, typically because NVRTC is newer than the driver and its PTX ISA
// is unknown to the driver's JIT; a CUBIN needs no JIT.
func BuildCUBIN(c BinaryCompiler, s Source, sm string, cache *Cache) ([]byte, error) {
	opts := Options(sm)
	key := Key(s, opts)
	if cache != nil {
		if b, ok := cache.LoadCUBIN(key); ok {
			return b, nil
		}
	}
	if c == nil {
		return nil, fmt.Errorf("%w: %s for %s: no compiler and no cached CUBIN", ErrCompile, s.File, sm)
	}
	b, _, err := c.CompileCUBIN(s.Code, s.File, opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %s for %s: %w", ErrCompile, s.File, sm, err)
	}
	if !isELF(b) {
		return nil, fmt.Errorf("%w: %s for %s: CUBIN is not an ELF image", ErrCompile, s.File, sm)
	}
	if cache != nil {
		_ = cache.StoreCUBIN(key, b) // a failed write only costs a recompile
	}
	return b, nil
}

// Build returns the PTX of every source for arch, keyed by file name,
// taking it from cache when present (cache may be nil) and storing what it
// compiles. It checks that each PTX defines every kernel of its source.
func Build(c Compiler, arch string, cache *Cache) (map[string][]byte, error) {
	out := make(map[string][]byte)
	for _, s := range Sources() {
		opts := Options(arch)
		key := Key(s, opts)
		if cache != nil {
			if ptx, ok := cache.Load(key); ok && HasEntries(ptx, s.Entries) == nil {
				out[s.File] = ptx
				continue
			}
		}
		if c == nil {
			return nil, fmt.Errorf("%w: %s for %s: no compiler and no cached PTX", ErrCompile, s.File, arch)
		}
		ptx, _, err := c.Compile(s.Code, s.File, opts)
		if err != nil {
			return nil, fmt.Errorf("%w: %s for %s: %w", ErrCompile, s.File, arch, err)
		}
		if err := HasEntries(ptx, s.Entries); err != nil {
			return nil, fmt.Errorf("%w: %s for %s: %w", ErrCompile, s.File, arch, err)
		}
		if cache != nil {
			// A cache that cannot be written only costs a recompile next time.
			_ = cache.Store(key, ptx)
		}
		out[s.File] = ptx
	}
	return out, nil
}

// HasEntries checks that ptx defines a visible .entry for every name.
func HasEntries(ptx []byte, names []string) error {
	have := map[string]bool{}
	for _, m := range entryRE.FindAllSubmatch(ptx, -1) {
		have[string(m[1])] = true
	}
	for _, n := range names {
		if !have[n] {
			return fmt.Errorf("kernels: PTX lacks .entry %s", n)
		}
	}
	return nil
}

var entryRE = regexp.MustCompile(`(?m)^\s*\.visible\s+\.entry\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
