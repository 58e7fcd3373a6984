package wire

// Limits both sides of the wire agree on, set on purpose: a batch of 512
// f32 CIFAR images is 6 MiB, over gRPC's 4 MiB default, while requests
// (an Open, a list of acks) are tiny.
const (
	// MaxBatchBytes is the largest inline batch tensor; a bigger batch
	// must use shared memory (the daemon answers InvalidArgument).
	MaxBatchBytes = 256 << 20
	// MaxBatchFieldBytes bounds a batch's extra fields (Batch.field_data),
	// as the daemon's loader.MaxBatchFieldBytes does.
	MaxBatchFieldBytes = 64 << 20
	// MaxMessageSize is the largest message the daemon sends and a client
	// accepts: an inline tensor and the extra fields, plus room for the
	// indices, labels, label sets and augmentation parameters (at
	// MaxBatchSize samples, under 0.5 MiB).
	MaxMessageSize = MaxBatchBytes + MaxBatchFieldBytes + 1<<20
	// MaxRequestSize is the largest message the daemon accepts: an Open
	// within the string limits below, or a window's worth of acks.
	MaxRequestSize = 64 << 10

	// MaxBatchSize is the most samples an Open may ask for per batch.
	MaxBatchSize = 16384
	// MaxInFlight is the largest window of unacknowledged batches.
	MaxInFlight = 32
	// DefaultInFlight is the window when an Open names none.
	DefaultInFlight = 4
	// MaxNameLen bounds Open.dataset and Open.client_name, and
	// MaxAugmentLen Open.augment, in bytes: the daemon refuses longer ones
	// (INVALID_ARGUMENT) before echoing them anywhere.
	MaxNameLen    = 256
	MaxAugmentLen = 4096
	// ShmExtraSlots are the slots a shared-memory stream holds beyond the
	// client's window, so the workers fill ahead while the client holds
	// a full window.
	ShmExtraSlots = DefaultInFlight
)

// gRPC transport settings both sides use: batches are large, and bigger
// flow-control windows and socket buffers keep a loopback link full.
const (
	InitialWindowSize     = 8 << 20
	InitialConnWindowSize = 16 << 20
	ReadBufferSize        = 1 << 20
	WriteBufferSize       = 1 << 20
)
