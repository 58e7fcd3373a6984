package cuda

import (
	"fmt"
	"sort"
	"time"
)

// OpTime is what Profile reports for one kind of operation: a kernel
// under the op that launched it, or a GEMM of one shape.
type OpTime struct {
	Op    string
	Calls int
	Total time.Duration
}

// SetProfile turns per-operation timing on or off (off by default) and
// clears what was recorded. While it is on, every kernel launch and GEMM
// waits for the stream before returning, so the device runs one op at a
// time and the host clock times each: a diagnostic that slows training,
// never for production runs. Not for concurrent use, as Device is not.
func (d *Device) SetProfile(on bool) {
	d.prof = nil
	if on {
		d.prof = make(map[string]*OpTime)
	}
}

// Profile returns the recorded times, the largest total first.
func (d *Device) Profile() []OpTime {
	out := make([]OpTime, 0, len(d.prof))
	for _, t := range d.prof {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Total > out[j].Total })
	return out
}

// profStart returns the time an op starts when profiling is on.
func (d *Device) profStart() time.Time {
	if d.prof == nil {
		return time.Time{}
	}
	return time.Now()
}

// profEnd waits for the op queued since t0 and records it under k. Callers
// check d.prof first, so that building k costs nothing when it is off.
func (d *Device) profEnd(t0 time.Time, k string) {
	d.fail(d.cu.Check("cuStreamSynchronize", d.cu.StreamSynchronize(d.stream)))
	t := d.prof[k]
	if t == nil {
		t = &OpTime{Op: k}
		d.prof[k] = t
	}
	t.Calls++
	t.Total += time.Since(t0)
}

func gemmKey(ta, tb bool, m, n, k int) string {
	return fmt.Sprintf("gemm %s%s m=%d n=%d k=%d", opName(ta), opName(tb), m, n, k)
}

func opName(trans bool) string {
	if trans {
		return "T"
	}
	return "N"
}
