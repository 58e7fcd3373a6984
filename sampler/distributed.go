package sampler

// STUB: signatures fixed; the bodies are being written.

// Distributed plans each rank's share of every epoch.
type Distributed struct {
	N        int64
	Rank     int
	World    int
	Seed     uint64
	Shuffle  bool
	DropLast bool
}

// Validate reports every problem with d at once.
func (d Distributed) Validate() error { panic("stub") }

// NumSamples returns how many positions each rank gets per epoch.
func (d Distributed) NumSamples() int64 { panic("stub") }

// Epoch returns the rank's plan for epoch e.
func (d Distributed) Epoch(e int64) Epoch { panic("stub") }

// Epoch is one rank's plan for one epoch.
type Epoch struct{}

// Len returns the number of positions.
func (e Epoch) Len() int64 { panic("stub") }

// At returns the dataset index at rank-local position pos.
func (e Epoch) At(pos int64) int64 { panic("stub") }

// Position is a resume point: batch Batch of epoch Epoch.
type Position struct{ Epoch, Batch int64 }

// Batches returns the number of batches of size bs per epoch for n positions.
func Batches(n int64, bs int, dropLast bool) int64 { panic("stub") }
