package pinned_test

import (
	"context"
	"fmt"

	"github.com/loaderd/loaderd/pinned"
)

func Example() {
	p, err := pinned.New(pinned.Config{SlotSize: 3 * 32 * 32 * 4 * 256, Slots: 4, Name: "cifar-f32"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()

	s, err := p.Lease(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	copy(s.Bytes(), "pixels")
	// A client on the same host would get (offset, gen) and ack with
	// p.ReleaseIndex(s.Index(), s.Gen()); in-process, release the handle.
	fmt.Println(s.Index(), s.Gen(), s.Offset(), len(s.Bytes()) == p.SlotSize())
	if err := s.Release(); err != nil {
		fmt.Println(err)
	}
	fmt.Println(s.Release() != nil, p.Stats().SlotsInUse)
	// Output:
	// 0 1 0 true
	// true 0
}

func ExampleNew_badConfig() {
	_, err := pinned.New(pinned.Config{SlotSize: -1, Slots: 0})
	fmt.Println(err)
	// Output:
	// pinned: bad config: Slots = 0, want > 0; SlotSize = -1, want > 0
}
