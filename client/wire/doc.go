// Package wire implements what the daemon and its Go clients share about
// loaderd.v1's bytes on the wire: the message and batch limits both sides
// set, the protobuf field numbers the hand-written codecs use (checked
// against the generated descriptors by a test), a non-zeroing gRPC buffer
// pool, and the two hand-written codecs: the daemon's, which sends an
// inline batch's tensor from its pinned slot without a copy, and the
// client's, which decodes a batch straight into the caller's buffer.
//
// Everything else on the wire goes through the generated code. The
// functions and the Pool are safe for concurrent use; a Decoder is not.
package wire
