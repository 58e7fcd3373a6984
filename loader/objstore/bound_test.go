package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loaderd/loaderd/loader/objstore"
	"github.com/loaderd/loaderd/loader/objstore/s3test"
)

// boundRetry is DefaultRetry's shape shrunk for tests, with attempts
// enough that only the time bound (2 s) can end the retries of a fault
// that persists: what these tests check is that it does.
var boundRetry = objstore.Retry{Attempts: 1000, Base: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
	Stall: 300 * time.Millisecond, Timeout: 2 * time.Second, Report: 250 * time.Millisecond}

// slack is how much later than the bound an error may come on a loaded
// machine; without the bound these faults last until the test's own
// 20 s deadline.
const slack = 4 * time.Second

// boundEnv is an env whose cache retries with r, with a good and a bad
// object in bucket "bkt".
type boundEnv struct {
	*env
	good, bad []byte
}

func newBoundEnv(t *testing.T, r objstore.Retry) *boundEnv {
	e := &boundEnv{env: newEnv(t, 0), good: blob(200000, 1), bad: blob(256<<10, 2)}
	e.cache.Retry = r
	b := e.srv.Bucket(t, "bkt")
	e.srv.Put(t, b, "good.tar", e.good)
	e.srv.Put(t, b, "bad.tar", e.bad)
	return e
}

func ctx20(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// logs captures objstore's log lines for the test.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) lines(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}

func captureLogs(t *testing.T) *logs {
	l := &logs{}
	objstore.SetLogger(slog.New(slog.NewTextHandler(l, nil)))
	t.Cleanup(func() { objstore.SetLogger(nil) })
	return l
}

// gaveUp checks err: an *objstore.Error naming url, ending retries
// (*objstore.RetryError) with status, within bound (the retry bound plus
// slack) of start; it returns the RetryError.
func gaveUp(t *testing.T, err error, url string, status int, start time.Time, bound time.Duration) *objstore.RetryError {
	t.Helper()
	took := time.Since(start)
	var oe *objstore.Error
	var re *objstore.RetryError
	if !errors.As(err, &oe) || oe.URL != url || !errors.As(err, &re) {
		t.Fatalf("after %v: %v (%T), want an *objstore.Error for %s ending its retries (*objstore.RetryError)", took, err, err, url)
	}
	if took > bound+slack {
		t.Fatalf("the error came after %v, want within the %v bound (+%v): %v", took, bound, slack, err)
	}
	msg := err.Error()
	if re.Status != status || re.Attempts < 2 || !strings.Contains(msg, url) || !strings.Contains(msg, fmt.Sprintf("after %d attempts", re.Attempts)) ||
		(status != 0 && !strings.Contains(msg, fmt.Sprintf("last: status %d", status))) {
		t.Fatalf("error %q: status %d, %d attempts; want status %d, 2 attempts or more, the URL, the attempts and the status named", msg, re.Status, re.Attempts, status)
	}
	t.Logf("error after %v: %v", took.Round(time.Millisecond), err)
	return re
}

// TestBoundServerError: a server answering 500 forever fails the open
// (HEAD) and a read of an object whose fill failed (GET) once the object
// has failed for the retry bound, naming the key, the attempts and the
// status; later reads of it then make one request each, a healthy
// object reads throughout, and the object reads again once the server
// heals.
func TestBoundServerError(t *testing.T) {
	e := newBoundEnv(t, boundRetry)
	e.px.Inject(s3test.ServerError, 1<<30, "", "bad.tar")
	start := time.Now()
	_, err := e.cache.Shards(ctx20(t), "s3://bkt/bad.tar", ".tar", e.opts)
	re := gaveUp(t, err, "s3://bkt/bad.tar", 500, start, boundRetry.Timeout)
	if re.Bound != boundRetry.Timeout {
		t.Fatalf("Bound %v, want the %v time bound", re.Bound, boundRetry.Timeout)
	}
	e.px.Clear()

	set, err := e.cache.Open(ctx20(t), "s3://bkt/{bad,good}.tar", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	e.px.Inject(s3test.ServerError, 1<<30, "GET", "bad.tar")
	start = time.Now()
	err = set.ReadAt(ctx20(t), 0, make([]byte, 1000), 5000)
	gaveUp(t, err, "s3://bkt/bad.tar", 500, start, boundRetry.Timeout)
	// Past the bound, each read of the failing object is one request.
	for range 3 {
		before := e.px.Count("GET", s3test.ServerError)
		err := set.ReadAt(ctx20(t), 0, make([]byte, 1000), 5000)
		var re *objstore.RetryError
		if !errors.As(err, &re) || re.Attempts != 1 || re.Total < 2 || e.px.Count("GET", s3test.ServerError) != before+1 {
			t.Fatalf("a read past the bound: %v, %d requests; want a RetryError after 1 attempt", err, e.px.Count("GET", s3test.ServerError)-before)
		}
	}
	got := make([]byte, 1000)
	if err := set.ReadAt(ctx20(t), 1, got, 5000); err != nil || !bytes.Equal(got, e.good[5000:6000]) {
		t.Fatalf("the healthy object: %v, bytes equal %v", err, bytes.Equal(got, e.good[5000:6000]))
	}
	e.px.Clear()
	if err := set.ReadAt(ctx20(t), 0, got, 5000); err != nil || !bytes.Equal(got, e.bad[5000:6000]) {
		t.Fatalf("the healed object: %v, bytes equal %v", err, bytes.Equal(got, e.bad[5000:6000]))
	}
}

// TestBoundNoAnswer: a server that never answers fails the open within
// the bound, each attempt cut at the response wait (Stall), with lines
// logged while it waits naming the object and the attempts; a healthy
// object's open logs none.
func TestBoundNoAnswer(t *testing.T) {
	e := newBoundEnv(t, boundRetry)
	l := captureLogs(t)
	files, err := e.cache.Shards(ctx20(t), "s3://bkt/good.tar", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, files, e.good)
	e.px.Inject(s3test.Hang, 1<<30, "HEAD", "bad.tar")
	start := time.Now()
	_, err = e.cache.Shards(ctx20(t), "s3://bkt/bad.tar", ".tar", e.opts)
	gaveUp(t, err, "s3://bkt/bad.tar", 0, start, boundRetry.Timeout)
	if !strings.Contains(err.Error(), "no response within") {
		t.Fatalf("%v: want the last error to say no response came", err)
	}
	waits := l.lines("object not answering yet")
	if len(waits) < 2 || !strings.Contains(waits[0], "object=s3://bkt/bad.tar") || !strings.Contains(waits[0], "attempts=") {
		t.Fatalf("lines logged while waiting: %q; want 2 or more, naming s3://bkt/bad.tar and the attempts", waits)
	}
	for _, w := range waits {
		if strings.Contains(w, "good.tar") {
			t.Fatalf("a healthy object's open logged %q", w)
		}
	}
	t.Logf("%d lines while waiting, the first: %s", len(waits), waits[0])
}

// TestBoundShortBodies: bodies cut in half every time still complete, a
// fill and ranged reads resuming where each stopped (an attempt that
// brings bytes does not count against Attempts); bodies cut before
// their first byte fail a read within the bound with ErrShortBody.
func TestBoundShortBodies(t *testing.T) {
	r := boundRetry
	r.Attempts = 5 // halving 256 KiB takes some 18 requests
	e := newBoundEnv(t, r)
	e.px.Inject(s3test.Truncate, 1<<30, "GET", "bad.tar")
	files, err := e.cache.Shards(ctx20(t), "s3://bkt/bad.tar", ".tar", e.opts)
	if err != nil {
		t.Fatalf("a fill through bodies cut in half: %v", err)
	}
	checkFiles(t, files, e.bad)
	set, err := e.cache.Open(ctx20(t), "s3://bkt/{bad,good}.tar", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	got := make([]byte, 3000)
	if err := set.ReadAt(ctx20(t), 0, got, 70000); err != nil || !bytes.Equal(got, e.bad[70000:73000]) {
		t.Fatalf("a ranged read through bodies cut in half: %v, bytes equal %v", err, bytes.Equal(got, e.bad[70000:73000]))
	}
	t.Logf("%d bodies cut in half, all resumed", e.px.Count("GET", s3test.Truncate))
	e.px.Clear()

	e.cache.Retry = boundRetry
	set2, err := e.cache.Open(ctx20(t), "s3://bkt/{bad,good}.tar", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	defer set2.Close()
	e.px.Inject(s3test.NoBody, 1<<30, "GET", "bad.tar")
	start := time.Now()
	err = set2.ReadAt(ctx20(t), 0, got, 70000)
	gaveUp(t, err, "s3://bkt/bad.tar", 0, start, boundRetry.Timeout)
	if !errors.Is(err, objstore.ErrShortBody) || !strings.Contains(err.Error(), "0 of 3000 bytes") {
		t.Fatalf("%v: want ErrShortBody, 0 of 3000 bytes", err)
	}
	if err := set2.ReadAt(ctx20(t), 1, got, 70000); err != nil || !bytes.Equal(got, e.good[70000:73000]) {
		t.Fatalf("the healthy object: %v", err)
	}
}

// TestZeroByteObject: an object of no bytes is named as such when a
// key, a prefix or a set names it, not handed to a format.
func TestZeroByteObject(t *testing.T) {
	e := newBoundEnv(t, boundRetry)
	e.srv.Put(t, "bkt", "d/a.tar", e.good)
	e.srv.Put(t, "bkt", "d/empty.tar", nil)
	for _, u := range []string{"s3://bkt/d/empty.tar", "s3://bkt/d/", "s3://bkt/d/*.tar", "s3://bkt/d/{a,empty}.tar"} {
		_, err := e.cache.Shards(ctx20(t), u, ".tar", e.opts)
		var oe *objstore.Error
		if !errors.Is(err, objstore.ErrZeroByte) || !errors.As(err, &oe) || oe.URL != "s3://bkt/d/empty.tar" || !strings.Contains(err.Error(), "zero-byte object d/empty.tar") {
			t.Fatalf("%s: %v; want ErrZeroByte naming s3://bkt/d/empty.tar", u, err)
		}
		if _, err := e.cache.Open(ctx20(t), u, ".tar", e.opts); !errors.Is(err, objstore.ErrZeroByte) {
			t.Fatalf("Open %s: %v; want ErrZeroByte", u, err)
		}
		t.Logf("%s: %v", u, err)
	}
	files, err := e.cache.Shards(ctx20(t), "s3://bkt/d/a.tar", ".tar", e.opts)
	if err != nil {
		t.Fatal(err)
	}
	checkFiles(t, files, e.good)
}
