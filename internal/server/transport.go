package server

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"

	"google.golang.org/grpc/mem"

	"github.com/loaderd/loaderd/loader"
	pb "github.com/loaderd/loaderd/proto/loaderd/v1"
)

// transport is how a batch's tensor reaches the client.
type transport interface {
	// describe fills the transport's part of the stream header.
	describe(h *pb.StreamHeader)
	// heldUntilAck reports whether a sent batch stays valid for the client
	// until its ack (the session then holds it in the window).
	heldUntilAck() bool
	// send sends msg with b's tensor. From the call on, b is the
	// transport's: it arranges b's release and the session reference
	// that goes with it.
	send(msg *pb.Batch, b *loader.Batch) error
}

// shmTransport sends references into the stream's shared region; the
// client reads the tensor in place and acks it.
type shmTransport struct{ ss *session }

func (t shmTransport) heldUntilAck() bool { return true }

func (t shmTransport) describe(h *pb.StreamHeader) {
	p := t.ss.slots.pool
	h.Transport = pb.Transport_TRANSPORT_SHM
	h.Shm = &pb.ShmRegion{
		Path:      fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), p.Fd()),
		Size:      int64(p.Size()),
		SlotSize:  int64(p.SlotSize()),
		SlotCount: uint32(p.Slots()),
		Locked:    p.Locked(),
	}
	if t.ss.token != nil {
		h.Shm.FdSocket = filepath.Base(t.ss.srv.opts.FdSocket)
		h.Shm.Token = t.ss.token
	}
}

func (t shmTransport) send(msg *pb.Batch, b *loader.Batch) error {
	msg.Tensor = &pb.Batch_Shm{Shm: &pb.ShmRef{Slot: uint32(b.Slot.Index()), Generation: b.Slot.Gen(),
		Offset: int64(b.Slot.Offset()), Length: int64(len(b.Data))}}
	return t.ss.st.Send(&pb.StreamReply{Msg: &pb.StreamReply_Batch{Batch: msg}})
}

// inlineTransport sends the tensor's bytes in the message, written by
// gRPC straight from the pinned slot (see codec).
type inlineTransport struct{ ss *session }

func (t inlineTransport) heldUntilAck() bool { return false }

func (t inlineTransport) describe(h *pb.StreamHeader) { h.Transport = pb.Transport_TRANSPORT_INLINE }

func (t inlineTransport) send(msg *pb.Batch, b *loader.Batch) error {
	buf, ref := newSlotBuffer(t.ss.slots, b)
	c := connRefsOf(t.ss.st.Context())
	tracked := ref != nil && c != nil && c.add(ref)
	err := t.ss.st.SendMsg(&outBatch{msg: msg, tensor: buf})
	if ref != nil && c != nil && (!tracked || c.isEnded()) {
		ref.release() // the connection's writer is gone: nothing reads the slot
	}
	return err
}

// slotRef is a batch's slot lent to gRPC as a mem.Buffer: as the buffer's
// pool, it learns when gRPC is done with the bytes and releases the batch
// and its session reference.
//
// gRPC frees every buffer it writes or drops from a stream it cleans up,
// but a connection that dies leaves the frames already queued on its
// streams unfreed. The connection's connRefs releases them when gRPC
// reports the connection ended (see connTracker); a cleanup on the
// buffer's handle is the backstop for a connection without one: once
// nothing can reach the handle, nothing can read the slot.
type slotRef struct {
	slots   *streamSlots
	b       *loader.Batch
	done    atomic.Bool
	cleanup runtime.Cleanup
	conn    *connRefs // set by connRefs.add
}

// newSlotBuffer hands b's tensor to gRPC without a copy, and returns the
// reference that gives it back. A tensor below gRPC's pooling threshold
// would be wrapped without a pool, and so never freed back to us: such
// small tensors are copied and b released at once (the reference is nil).
func newSlotBuffer(slots *streamSlots, b *loader.Batch) (mem.Buffer, *slotRef) {
	slots.retain()
	r := &slotRef{slots: slots, b: b}
	if mem.IsBelowBufferPoolingThreshold(cap(b.Data)) {
		buf := mem.SliceBuffer(append([]byte(nil), b.Data...))
		r.release()
		return buf, nil
	}
	data := new([]byte)
	*data = b.Data
	r.cleanup = runtime.AddCleanup(data, (*slotRef).release, r)
	return mem.NewBuffer(data, r), r
}

// Get is never called: the buffer is made around the slot.
func (r *slotRef) Get(int) *[]byte { panic("server: slotRef.Get") }

// Put runs when gRPC has written or dropped the tensor.
func (r *slotRef) Put(*[]byte) {
	r.cleanup.Stop()
	r.release()
}

func (r *slotRef) release() {
	if r.done.Swap(true) {
		return
	}
	if r.conn != nil {
		r.conn.remove(r)
	}
	r.b.Release()
	r.slots.drop()
}
