package server

import (
	"bytes"
	"context"
	"errors"
	"hash"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/client"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// undigestable is a source whose fingerprint fails.
type undigestable struct{ testSource }

func (undigestable) Digest(hash.Hash) error { return errors.New("shard gone") }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestFingerprintServed: ListDatasets and every stream header carry the
// dataset's loader.Fingerprint, the same in both, another for another
// dataset; a dataset whose fingerprint fails is served without one, and
// the failure logged once.
func TestFingerprintServed(t *testing.T) {
	srcs := map[string]loader.Source{"a": synthetic.New(500, 0), "b": synthetic.New(500, 1), "broken": undigestable{testSource{n: 40}}}
	var datasets []*Dataset
	for name, src := range srcs {
		datasets = append(datasets, &Dataset{Name: name, Spec: "test:", Source: src, Augment: "out=u8:hwc"})
	}
	var logs syncBuffer
	srv, err := New(Options{Workers: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, datasets...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	c := dial(t, lis.Addr().String())
	ctx := t.Context()
	list, err := c.Datasets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, d := range list {
		listed[d.GetName()] = d.GetFingerprint()
	}
	for _, tc := range []struct {
		name  string
		empty bool
	}{{"a", false}, {"b", false}, {"broken", true}} {
		t.Run(tc.name, func(t *testing.T) {
			want := ""
			if !tc.empty {
				var err error
				if want, err = loader.Fingerprint(srcs[tc.name]); err != nil || want == "" {
					t.Fatalf("loader.Fingerprint: %q, %v", want, err)
				}
			}
			if listed[tc.name] != want {
				t.Errorf("ListDatasets: fingerprint %q, want %q", listed[tc.name], want)
			}
			s, err := c.Open(ctx, client.StreamConfig{Dataset: tc.name, BatchSize: 8, Epochs: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.Header().GetFingerprint(); got != want {
				t.Errorf("stream header: fingerprint %q, want %q", got, want)
			}
			b, err := s.Next(ctx)
			if err != nil {
				t.Fatalf("the dataset is not served: %v", err)
			}
			b.Release()
		})
	}
	if listed["a"] == listed["b"] {
		t.Errorf("two datasets fingerprint the same: %s", listed["a"])
	}
	if n := strings.Count(logs.String(), "shard gone"); n != 1 {
		t.Errorf("the failed fingerprint is logged %d times, want once:\n%s", n, logs.String())
	}
}
