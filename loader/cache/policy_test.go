package cache_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/cache"
	"github.com/loaderd/loaderd/sampler"
)

// accesses is the order in which a pool serves streams over a dataset of
// n samples: each stream (seed 1, 2, …; world 1, shuffled) reads its
// epochs' permutations, and the streams take chunks of 16 in turn, as the
// pool's workers do.
func accesses(n int64, streams, epochs int) []int64 {
	const chunk = 16
	seqs := make([][]int64, streams)
	for s := range seqs {
		d := sampler.Distributed{N: n, World: 1, Seed: uint64(s + 1), Shuffle: true}
		for e := range int64(epochs) {
			ep := d.Epoch(e)
			seqs[s] = append(seqs[s], ep.Fill(make([]int64, ep.Len()), 0)...)
		}
	}
	var out []int64
	for k := 0; k < len(seqs[0]); k += chunk {
		for s := range seqs {
			out = append(out, seqs[s][k:min(k+chunk, len(seqs[s]))]...)
		}
	}
	return out
}

// lru simulates a least-recently-used cache of capacity samples.
type lru struct {
	prev, next []int32 // a ring through sentinel n, most recent first
	in         []bool
	size, cap  int
}

func newLRU(n, capacity int) *lru {
	l := &lru{prev: make([]int32, n+1), next: make([]int32, n+1), in: make([]bool, n), cap: capacity}
	l.prev[n], l.next[n] = int32(n), int32(n)
	return l
}

func (l *lru) unlink(i int32) { l.next[l.prev[i]], l.prev[l.next[i]] = l.next[i], l.prev[i] }

func (l *lru) pushFront(i int32) {
	s := int32(len(l.in))
	l.prev[i], l.next[i] = s, l.next[s]
	l.prev[l.next[s]] = i
	l.next[s] = i
}

// access reports a hit, and makes i the most recent.
func (l *lru) access(i int64) bool {
	k := int32(i)
	if l.in[k] {
		l.unlink(k)
		l.pushFront(k)
		return true
	}
	if l.size == l.cap {
		old := l.prev[len(l.in)]
		l.unlink(old)
		l.in[old] = false
		l.size--
	}
	l.pushFront(k)
	l.in[k] = true
	l.size++
	return false
}

// tiny is a dataset of n one-byte samples, for the policy measure.
type tiny struct{ n int64 }

func (s tiny) Len() int64         { return s.n }
func (s tiny) Spec() augment.Spec { return augment.Spec{H: 1, W: 1, C: 1, DType: sample.U8} }
func (s tiny) Classes() []string  { return nil }
func (s tiny) String() string     { return "tiny" }
func (s tiny) Close() error       { return nil }
func (s tiny) Sample(i int64, scratch []byte) (int32, []byte, error) {
	scratch[0] = byte(i)
	return 0, scratch[:1], nil
}

var _ loader.Source = tiny{}

// TestPolicyHitRates measures the hit rate of this package's cache
// (static admission) against LRU's, with the cache holding 10%–100% of
// CIFAR-10's 50,000 samples, under one stream and under four streams of
// different seeds reading shuffled epochs at once: the first epoch
// (filling) and the steady state after it. Static admission's steady
// state is C/N, the best any policy can do when every epoch is a fresh
// uniform permutation; LRU keeps what was just read, which is what that
// stream will not read again this epoch, and falls short. go test -v
// prints the table.
func TestPolicyHitRates(t *testing.T) {
	n := int64(50000)
	if raceEnabled {
		n = 5000 // the race detector makes each access ten times slower
	}
	const epochs = 3
	for _, streams := range []int{1, 4} {
		seq := accesses(n, streams, epochs)
		first := int(n) * streams // accesses of epoch 0
		t.Logf("%d stream(s) of %d samples: hit rate in epoch 0 and in epochs 1-%d", streams, n, epochs-1)
		t.Logf("%-8s %-11s %-11s %-11s %-11s", "cache", "static e0", "static e1+", "LRU e0", "LRU e1+")
		for _, frac := range []float64{0.1, 0.25, 0.5, 0.75, 1} {
			capacity := int(frac * float64(n))
			c, err := cache.New(tiny{n}, cache.Config{Bytes: int64(capacity)})
			if err != nil {
				t.Fatal(err)
			}
			l := newLRU(int(n), capacity)
			var staticHits, lruHits [2]int
			buf := make([]byte, 1)
			for k, i := range seq {
				phase := min(k/first, 1)
				before := c.Stats().Hits
				if _, _, err := c.Sample(i, buf); err != nil {
					t.Fatal(err)
				}
				staticHits[phase] += int(c.Stats().Hits - before)
				if l.access(i) {
					lruHits[phase]++
				}
			}
			c.Close()
			rate := func(h [2]int, p int) float64 {
				if p == 0 {
					return float64(h[0]) / float64(first)
				}
				return float64(h[1]) / float64(len(seq)-first)
			}
			s0, s1, l0, l1 := rate(staticHits, 0), rate(staticHits, 1), rate(lruHits, 0), rate(lruHits, 1)
			t.Logf("%-8s %-11.4f %-11.4f %-11.4f %-11.4f", fmt.Sprintf("%.0f%%", frac*100), s0, s1, l0, l1)
			if math.Abs(s1-frac) > 0.001 {
				t.Errorf("%d streams, cache of %v: static steady-state hit rate %.4f, want C/N = %v", streams, frac, s1, frac)
			}
			if frac < 1 && s1 <= l1 {
				t.Errorf("%d streams, cache of %v: static %.4f is not above LRU's %.4f", streams, frac, s1, l1)
			}
			if frac == 1 && l1 != 1 {
				t.Errorf("%d streams, a cache of the whole dataset: LRU's steady state %.4f, want 1", streams, l1)
			}
		}
	}
}
