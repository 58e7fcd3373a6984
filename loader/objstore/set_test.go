package objstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync"
	"testing"

	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// TestSetReadAt: ranged reads give the object's bytes through every
// fault; past the object, or for good failures, an error naming it.
func TestSetReadAt(t *testing.T) {
	e := newEnv(t, 0)
	b := e.srv.Bucket(t, "data")
	want := blob(300000, 1)
	e.srv.Put(t, b, "r/x.tar", want)
	set, err := e.cache.Open(t.Context(), "s3://data/r/x.tar", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	for i, f := range []s3test.Fault{0, s3test.SlowDown, s3test.Reset, s3test.Truncate, s3test.Stall, s3test.Hang} {
		if f != 0 {
			e.px.Inject(f, 2, "GET", "x.tar")
		}
		off, n := int64(i*40000+7), 70000
		got := make([]byte, n)
		if err := set.ReadAt(t.Context(), 0, got, off); err != nil || !bytes.Equal(got, want[off:off+int64(n)]) {
			t.Fatalf("%v: %v, bytes equal %v", f, err, bytes.Equal(got, want[off:off+int64(n)]))
		}
	}
	if err := set.ReadAt(t.Context(), 0, make([]byte, 10), int64(len(want))-5); err == nil {
		t.Fatal("a read past the end succeeded")
	}
	e.px.Inject(s3test.SlowDown, 100, "GET", "x.tar")
	err = set.ReadAt(t.Context(), 0, make([]byte, 10), 0)
	var oe *objstore.Error
	if !errors.As(err, &oe) || oe.URL != "s3://data/r/x.tar" {
		t.Fatalf("persistent throttling: %v", err)
	}
	e.px.Clear()
	if _, _, err := set.Get(t.Context(), "data", "r/x.tar.idx", 1<<20); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing sidecar: %v, want fs.ErrNotExist", err)
	}
	noPartial(t, e.cache.Dir)
}

// TestSetWantOrder: with one fill at a time, the objects asked for with
// Want are filled first, in the order asked, then the rest in order; each
// fill is complete and verified (Cached), nothing partial is left.
func TestSetWantOrder(t *testing.T) {
	e := newEnv(t, 0)
	objstore.SetFills(e.cache, 1)
	b := e.srv.Bucket(t, "data")
	for i := range 6 {
		e.srv.Put(t, b, fmt.Sprintf("w/%d.tar", i), blob(5000+i, uint64(i)))
	}
	set, err := e.cache.Open(t.Context(), "s3://data/w/", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	set.Want(4)
	set.Want(2)
	set.Want(4) // asked twice: filled once
	var mu sync.Mutex
	var order []int
	done := make(chan struct{})
	set.Start(func(k int, err error) {
		if err != nil {
			t.Error(err)
		}
		mu.Lock()
		defer mu.Unlock()
		order = append(order, k)
		if len(order) == 6 {
			close(done)
		}
	}, nil)
	<-done
	if !slices.Equal(order, []int{4, 2, 0, 1, 3, 5}) {
		t.Fatalf("fill order %v, want [4 2 0 1 3 5]", order)
	}
	for k := range 6 {
		if !set.Cached(k) {
			t.Fatalf("object %d not cached", k)
		}
	}
	if n := e.px.Count("GET", 0); n != 6+1 {
		t.Fatalf("%d GETs, want 7 (a listing, 6 objects)", n)
	}
	noPartial(t, e.cache.Dir)
}
