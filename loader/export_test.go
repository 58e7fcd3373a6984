package loader

// The scheduler's internals, for the external tests (which are external
// so that they can use the formats, which import this package).

// ChunkSize is how many samples a worker takes at once.
const ChunkSize = chunkSize

// Plan plans and queues every idle batch of l now, as Next would.
func Plan(l *Loader) {
	l.mu.Lock()
	l.planLocked()
	l.mu.Unlock()
}

// SkipWithoutFaultAddress is skipWithoutFaultAddress for the external tests.
var SkipWithoutFaultAddress = skipWithoutFaultAddress
