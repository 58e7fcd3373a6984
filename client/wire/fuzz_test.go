package wire

import (
	"maps"
	"slices"
	"testing"
)

// FuzzDecode holds the client's Decoder to proto.Unmarshal on any bytes,
// cut into buffers of any sizes (gRPC hands over one per 16 KiB frame,
// but nothing in the decoder may depend on where the cuts fall): where
// proto.Unmarshal fails, Decode fails with ErrMalformed; where it
// succeeds, Decode succeeds with the same message, unknown fields
// discarded. Dst holds any tensor, so ErrTooLarge never applies, and a
// Batch is set, so ErrNoBatch never does: the Decoder's documented
// departures. Each input is decoded twice with one Decoder, cut two ways,
// as a stream reuses it.
func FuzzDecode(f *testing.F) {
	seeds := messages(300)
	// 20 KiB of nested groups, which TestDecodeValid decodes, would make
	// the fuzzer spend its time minimizing inputs that size.
	delete(seeds, "deep unknown groups")
	for _, name := range slices.Sorted(maps.Keys(seeds)) {
		msg := seeds[name]
		f.Add(msg, []byte(nil))
		f.Add(msg, []byte{1})
		f.Add(msg, []byte{0, 7, 200, 3})
	}
	f.Fuzz(func(t *testing.T, msg, cuts []byte) {
		sizes := make([]int, len(cuts)) // split's: 0 is an empty buffer
		for i, c := range cuts {
			sizes[i] = int(c)
		}
		d := Decoder{Batch: dirty(), Dst: make([]byte, len(msg))}
		check(t, &d, msg, sizes)
		check(t, &d, msg, nil)
	})
}
