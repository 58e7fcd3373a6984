package client

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loaderd/loaderd/pinned"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// Region returns the daemon's shared-memory region this stream's batches
// are views of (nil for an inline stream), mapped read-only: writing to it
// faults. It stays mapped until Close, so a caller may register it once
// for DMA (cuMemHostRegister with the read-only flag) and must unregister
// it before Close. A stream that reconnects maps the new daemon's region:
// Region then returns that one, and both stay mapped until Close.
func (s *Stream) Region() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shared
}

// mapRegion maps the stream's shared region read-only: its descriptor
// fetched over the daemon's hand-over socket when the client came through
// a Unix socket (works across PID namespaces, containers and users), else
// opened through the daemon's /proc path (same user, same namespace).
func mapRegion(sock string, shm *pb.ShmRegion) (*pinned.Region, error) {
	var f *os.File
	var err error
	if sock != "" && shm.GetFdSocket() != "" {
		f, err = fetchRegion(filepath.Join(filepath.Dir(sock), shm.GetFdSocket()), shm.GetToken())
	} else {
		f, err = os.Open(shm.GetPath())
		if err != nil {
			err = fmt.Errorf("client: shared memory %s (is the daemon on this host?): %w", shm.GetPath(), err)
		}
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pinned.Map(int(f.Fd()), int(shm.GetSize()), pinned.MapOptions{})
	if err != nil {
		return nil, fmt.Errorf("client: shared memory: %w", err)
	}
	return r, nil
}

// receive fills free ring buffers until the stream ends.
func (s *Stream) receive() {
	defer close(s.done)
	defer close(s.ready)
	for {
		var b *Batch
		select {
		case b = <-s.free:
		case <-s.ctx.Done():
			s.err = fmt.Errorf("client: stream closed: %w", s.ctx.Err())
			return
		}
		err := s.recv(b)
		if err == nil {
			s.ready <- b
			continue
		}
		s.free <- b
		if s.ctx.Err() != nil {
			s.err = fmt.Errorf("client: stream closed: %w", s.ctx.Err())
			return
		}
		if err == io.EOF {
			s.err = io.EOF
			return
		}
		if !s.resumable(err) { // it set s.err
			return
		}
	}
}

// recv receives the next batch into b.
func (s *Stream) recv(b *Batch) error {
	s.dec.Batch, s.dec.Dst = &b.w, b.buf
	for {
		if err := s.gs.RecvMsg(&s.dec); err != nil {
			return err
		}
		switch {
		case s.dec.Header != nil:
			return errors.New("client: second stream header")
		case s.dec.HasBatch:
			return s.accept(b)
		}
		// Neither a header nor a batch: a kind of message this client
		// does not know, from a newer daemon. Skip it, as protobuf skips
		// unknown fields.
	}
}

// accept checks a decoded batch and files it under this stream.
func (s *Stream) accept(b *Batch) error {
	w := &b.w
	b.Data = w.Data
	if w.HasShm {
		off, n, size := w.Shm.Offset, w.Shm.Length, int64(len(s.region))
		if off < 0 || n < 0 || off > size || n > size-off {
			return fmt.Errorf("client: batch %d lies outside the shared region", w.Seq)
		}
		b.Data = s.region[off : off+n : off+n]
	}
	if b.Data == nil {
		return fmt.Errorf("client: batch %d carries no tensor", w.Seq)
	}
	b.fill()
	b.serverSeq, b.Seq, b.gen, b.held = w.Seq, s.seq, s.gen, true
	s.seq++
	if b.Offset = 0; b.Epoch == s.next.Epoch {
		b.Offset = s.next.Offset
	}
	next := s.after(b.Position(), s.header)
	s.mu.Lock()
	s.next = next
	s.stats.Batches++
	s.stats.Images += int64(len(b.Indices))
	s.stats.Bytes += int64(len(b.Data))
	s.mu.Unlock()
	return nil
}

// resumable reconnects after the daemon went away, at the first batch not
// yet received. It reports whether the stream goes on.
func (s *Stream) resumable(err error) bool {
	code := status.Code(err)
	if code != codes.Unavailable || s.ctx.Err() != nil {
		s.err = err
		return false
	}
	if s.endEpoch > 0 && s.next.Epoch >= s.endEpoch {
		s.err = io.EOF
		return false
	}
	s.mu.Lock()
	resumes := s.stats.Reconnects
	s.mu.Unlock()
	if resumes >= s.cfg.Reconnects {
		s.err = fmt.Errorf("client: stream lost at %v after %d resumes: %w", s.next, resumes, err)
		return false
	}
	// Retry until ReconnectWait has passed: a daemon that is stopping
	// refuses at once, and its successor may take a while to listen.
	deadline := time.Now().Add(s.cfg.ReconnectWait)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		cerr := s.connect(s.ctx, true)
		if cerr == nil {
			s.mu.Lock()
			s.stats.Reconnects++
			s.mu.Unlock()
			return true
		}
		err = cerr
		if s.ctx.Err() != nil || time.Now().Add(backoff).After(deadline) {
			break
		}
		select {
		case <-time.After(backoff):
		case <-s.ctx.Done():
		}
	}
	s.err = fmt.Errorf("client: stream lost at %v: %w", s.next, err)
	return false
}
