package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/loader"
)

// fingerprint is a dataset's loader.Fingerprint, which ListDatasets and
// every stream header carry so that the clients of a pool of daemons can
// check they all serve the same bytes. It is computed once, in the
// background from New on (it reads every sample's name and label and
// the source's digest: a second or more on a large folder), and waited
// for on first use.
//
// A fingerprint that fails (a file gone, a mapping that faults) does not
// stop the daemon serving the dataset: it is logged once, as an error, and
// served empty, which a client of a pool refuses, since it cannot check;
// a client of one daemon does not look at it.
type fingerprint struct {
	once  sync.Once
	done  chan struct{} // closed once value is set
	value string
}

// startFingerprint computes d's fingerprint in the background, once.
func (d *Dataset) startFingerprint(log *slog.Logger) {
	d.fp.once.Do(func() {
		d.fp.done = make(chan struct{})
		go func() {
			defer close(d.fp.done)
			start := time.Now()
			v, err := loader.Fingerprint(d.Source)
			if err != nil {
				log.Error("dataset has no fingerprint: serving it without one, which clients of a pool of daemons refuse",
					"dataset", d.Name, "err", err)
				return
			}
			d.fp.value = v
			log.Info("dataset fingerprint", "dataset", d.Name, "fingerprint", v, "took", time.Since(start).Round(time.Millisecond))
		}()
	})
}

// Fingerprint returns the dataset's fingerprint (see loader.Fingerprint),
// waiting for it if it is still being computed; "" if it failed. The
// error is ctx's, when ctx ends first.
func (d *Dataset) Fingerprint(ctx context.Context) (string, error) {
	d.startFingerprint(slog.Default()) // started by New already, but for a Dataset no Server holds
	select {
	case <-d.fp.done:
		return d.fp.value, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// fingerprintRPC is Fingerprint for an RPC: ctx's error as its status.
func (d *Dataset) fingerprintRPC(ctx context.Context) (string, error) {
	fp, err := d.Fingerprint(ctx)
	if err != nil {
		return "", status.FromContextError(err).Err()
	}
	return fp, nil
}

// fingerprintWait is Fingerprint for a stream header: computed in the
// background from New on, it is there long before most streams open, and
// a stream that opens sooner waits for it.
func (d *Dataset) fingerprintWait() string {
	fp, _ := d.Fingerprint(context.Background())
	return fp
}

// waitFingerprints waits until no fingerprint reads a source, so that
// Shutdown may close them; false when ctx ends first.
func (s *Server) waitFingerprints(ctx context.Context) bool {
	for _, d := range s.datasets {
		if _, err := d.Fingerprint(ctx); err != nil {
			return false
		}
	}
	return true
}
