package trainer

import "github.com/loaderd/loaderd/client"

// SetBatchHook makes f see every batch before it is trained on (from the
// ranks' goroutines in ddp); the returned function removes it.
func SetBatchHook(f func(rank int, b *client.Batch)) (undo func()) {
	batchHook = f
	return func() { batchHook = nil }
}
