// Package client implements the Go client of loaderd: what a Go trainer
// links to receive batches from a daemon, and nothing else (no cgo, no
// training engine, no dataset formats).
//
// Dial connects to a daemon; Client.Datasets lists what it serves, and
// Client.Open starts a Stream of one rank's batches, described by a
// StreamConfig. A Stream receives batches in order into a small ring of
// pinned buffers it owns (or, with StreamConfig.SharedMemory, as views of
// the daemon's shared region on the same host), up to Prefetch ahead of
// the caller (DefaultPrefetch by default). Stream.Next returns the next
// Batch; Batch.Release acknowledges it and hands its buffer back. The
// Stream counts how long callers waited in Next (Stats.WaitShare): the
// number that says whether loaderd keeps the devices fed.
//
// A dataset opened with fields= carries extra fields beside each image,
// the dataset's own bytes (Batch.Field, Batch.FieldPresent); a
// multi-label one, label sets (Batch.LabelSet, Batch.MultiHot).
//
// A stream whose daemon goes away (a restart, a rolling upgrade) resumes
// by itself: it reconnects, up to StreamConfig.Reconnects times, and
// starts again at the first batch it had not received, so the caller sees
// no gap and no repeat. Stream.Position says where a new stream would
// resume, which is what a checkpoint stores. Consume reads a stream to its
// end and reports its Stats (the `trainer consume` command).
//
// Package trainer (github.com/loaderd/loaderd/trainer) is a reference
// trainer built on this package.
//
// Concurrency: a Client is safe for concurrent use, and may serve many
// Streams at once. A Stream's Next must be called from one goroutine at a
// time; Release (each batch once), Stats, Position, Header and Close may
// be called from any goroutine, concurrently with Next. Close ends a Next
// in progress with an error, and the batches still held become invalid.
package client
