package server

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
	"github.com/loaderd/loaderd/loader/objstore"
)

// Config is `loaderd serve` as flags give it.
type Config struct {
	Listen          string      // TCP address; "" with Unix set serves the socket only
	Unix            string      // Unix socket path, for same-host clients
	UnixMode        os.FileMode // permissions of the Unix sockets; default 0660
	MemoryLimit     int64       // batch memory bound in bytes; 0: DefaultMemoryLimit
	MetricsListen   string      // Prometheus /metrics address; "" disables
	Datasets        []string    // name=FORMAT:PATH, repeatable
	Workers         int         // worker goroutines; with AutoWorkers, unused (0)
	AutoWorkers     bool        // --workers auto: the daemon sets the active workers, 1..MaxWorkers
	MaxWorkers      int         // --workers-max: the most --workers auto may use; default GOMAXPROCS
	MaxStreams      int
	ShutdownTimeout time.Duration
	OnError         string // fail (the default) or skip unreadable samples
	MaxSkips        int64  // with skip, fail a stream after this many; 0: no bound
	CacheDir        string // local copies of s3:// shards; "": $LOADERD_CACHE_DIR, else the user's cache directory
	CacheBytes      int64  // bound on CacheDir; 0: half its file system's free space

	// The TCP listener's security (tls.go, auth.go); the Unix socket has none.
	TLSCert, TLSKey string // serve --listen over TLS 1.3
	TLSClientCA     string // require client certificates signed by these CAs
	AuthTokens      string // bearer tokens file
	InsecureTCP     bool   // allow plaintext on a non-loopback --listen
}

// DefaultDataset is served when no --dataset is given.
const DefaultDataset = "synthetic=synthetic"

// EnsureDefaults fills what was left unset.
func (c *Config) EnsureDefaults() {
	if c.Listen == "" && c.Unix == "" {
		c.Listen = "127.0.0.1:50051"
	}
	if len(c.Datasets) == 0 {
		c.Datasets = []string{DefaultDataset}
	}
	if c.Workers == 0 && !c.AutoWorkers {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.AutoWorkers && c.MaxWorkers == 0 {
		c.MaxWorkers = runtime.GOMAXPROCS(0)
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 10 * time.Second
	}
	if c.OnError == "" {
		c.OnError = "fail"
	}
	if c.UnixMode == 0 {
		c.UnixMode = 0o660
	}
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit()
	}
}

// Validate reports every problem at once.
func (c *Config) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, d := range c.Datasets {
		name, spec, ok := strings.Cut(d, "=")
		switch {
		case !ok || name == "" || spec == "":
			errs = append(errs, fmt.Errorf("--dataset %q: want name=FORMAT:PATH", d))
		case seen[name]:
			errs = append(errs, fmt.Errorf("--dataset %q: name %q used twice", d, name))
		}
		seen[name] = true
	}
	switch {
	case c.AutoWorkers && (c.MaxWorkers < 1 || c.MaxWorkers > 1024):
		errs = append(errs, fmt.Errorf("--workers-max %d: want 1..1024", c.MaxWorkers))
	case c.AutoWorkers && c.Workers != 0:
		errs = append(errs, fmt.Errorf("--workers %d and auto at once", c.Workers))
	case !c.AutoWorkers && c.MaxWorkers != 0:
		errs = append(errs, fmt.Errorf("--workers-max %d needs --workers auto", c.MaxWorkers))
	case !c.AutoWorkers && (c.Workers < 1 || c.Workers > 1024):
		errs = append(errs, fmt.Errorf("--workers %d: want 1..1024 or auto", c.Workers))
	}
	if c.MaxStreams < 0 {
		errs = append(errs, fmt.Errorf("--max-streams %d: want 0 (unlimited) or more", c.MaxStreams))
	}
	if _, err := loader.ParseErrorPolicy(c.OnError); err != nil {
		errs = append(errs, fmt.Errorf("--on-error: %w", err))
	}
	if c.MaxSkips < 0 {
		errs = append(errs, fmt.Errorf("--max-skips %d is negative", c.MaxSkips))
	}
	if c.CacheBytes < 0 {
		errs = append(errs, fmt.Errorf("--cache-bytes %d is negative", c.CacheBytes))
	}
	if c.UnixMode&^os.ModePerm != 0 {
		errs = append(errs, fmt.Errorf("--unix-mode %o: want permission bits only, e.g. 0660", c.UnixMode))
	}
	if c.MemoryLimit < 0 {
		errs = append(errs, fmt.Errorf("--memory-limit %d is negative", c.MemoryLimit))
	}
	if c.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout %v is negative", c.ShutdownTimeout))
	}
	errs = append(errs, c.validateSecurity()...)
	return errors.Join(errs...)
}

// PoolWorkers is the number of worker goroutines the daemon starts.
func (c *Config) PoolWorkers() int {
	if c.AutoWorkers {
		return c.MaxWorkers
	}
	return c.Workers
}

// ParseWorkers reads --workers: a count, or "auto".
func ParseWorkers(s string) (n int, auto bool, err error) {
	if s == "auto" {
		return 0, true, nil
	}
	n, err = strconv.Atoi(s)
	if err != nil {
		return 0, false, fmt.Errorf("--workers %q: want a number or auto", s)
	}
	return n, false, nil
}

// OpenDatasets opens every --dataset, closing what it opened on failure.
func (c *Config) OpenDatasets() ([]*Dataset, error) {
	if c.CacheDir != "" || c.CacheBytes != 0 {
		// Process-wide, as the format registry is: every s3:// dataset
		// shares the node's one cache.
		objstore.SetCache(c.CacheDir, c.CacheBytes)
	}
	var out []*Dataset
	for _, d := range c.Datasets {
		name, spec, _ := strings.Cut(d, "=")
		src, err := cache.Open(spec) // loader.Open, with ?cache=decoded taken out
		if err != nil {
			for _, o := range out {
				o.Source.Close()
			}
			return nil, fmt.Errorf("dataset %s: %w", name, err)
		}
		out = append(out, &Dataset{Name: name, Spec: spec, Source: src})
	}
	return out, nil
}
