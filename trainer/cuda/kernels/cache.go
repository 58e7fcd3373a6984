package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Cache keeps compiled PTX on disk, keyed by a hash of the source and the
// compile options (which name the architecture), so a restart skips NVRTC
// and a machine without NVRTC can use PTX compiled elsewhere. The key does
// not name the NVRTC version: PTX from an older NVRTC loads on newer
// drivers, which is the direction that matters (CI's CUDA 11.8 NVRTC).
type Cache struct {
	Dir string
}

// CacheEnv names a directory that overrides the default cache location
// (for PTX compiled on another machine and shipped with the binary).
const CacheEnv = "LOADERD_PTX_CACHE"

// DefaultCache returns the cache in $LOADERD_PTX_CACHE, else under
// os.UserCacheDir()/loaderd/ptx.
func DefaultCache() (*Cache, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return &Cache{Dir: d}, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("kernels: cache dir: %w", err)
	}
	return &Cache{Dir: filepath.Join(d, "loaderd", "ptx")}, nil
}

// Key names s compiled with opts: the file, the architecture and a hash of
// both the code and every option.
func Key(s Source, opts []string) string {
	h := sha256.New()
	h.Write([]byte(s.Code))
	for _, o := range opts {
		h.Write([]byte{0})
		h.Write([]byte(o))
	}
	arch := "unknown"
	for _, o := range opts {
		if a, ok := strings.CutPrefix(o, "--gpu-architecture="); ok {
			arch = a
		}
	}
	return fmt.Sprintf("%s-%s-%s", strings.TrimSuffix(s.File, ".cu"), arch, hex.EncodeToString(h.Sum(nil))[:24])
}

func (c *Cache) path(key string) string { return filepath.Join(c.Dir, key+".ptx") }

func (c *Cache) cubinPath(key string) string { return filepath.Join(c.Dir, key+".cubin") }

// Load returns the cached PTX for key.
func (c *Cache) Load(key string) ([]byte, bool) {
	b, err := os.ReadFile(c.path(key))
	if err != nil || len(b) == 0 || b[len(b)-1] != 0 {
		return nil, false // absent, or cut short (no NVRTC trailing NUL)
	}
	return b, true
}

// LoadCUBIN returns the cached CUBIN for key (BuildCUBIN's).
func (c *Cache) LoadCUBIN(key string) ([]byte, bool) {
	b, err := os.ReadFile(c.cubinPath(key))
	if err != nil || !isELF(b) {
		return nil, false
	}
	return b, true
}

// StoreCUBIN writes cubin under key atomically, as Store does.
func (c *Cache) StoreCUBIN(key string, cubin []byte) error {
	return c.store(key, c.cubinPath(key), cubin)
}

func isELF(b []byte) bool { return len(b) > 4 && string(b[:4]) == "\x7fELF" }

// Store writes ptx under key atomically (temporary file, then rename), so
// concurrent processes never read a partial file.
func (c *Cache) Store(key string, ptx []byte) error { return c.store(key, c.path(key), ptx) }

func (c *Cache) store(key, path string, b []byte) error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("kernels: cache: %w", err)
	}
	f, err := os.CreateTemp(c.Dir, key+".*.tmp")
	if err != nil {
		return fmt.Errorf("kernels: cache: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil || cerr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("kernels: cache write: %v %v", werr, cerr)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("kernels: cache: %w", err)
	}
	return nil
}
