package loader_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
	"github.com/loaderd/loaderd/loader"
	"github.com/loaderd/loaderd/loader/format/synthetic"
)

// withFields gives a source two fields, "a" (x then the index) and "b"
// (absent for odd indices), and label sets {i%10, (i+3)%10}.
type withFields struct{ loader.Source }

func (withFields) FieldNames() []string { return []string{"a", "b"} }
func (withFields) MultiLabel() bool     { return true }

func (withFields) AppendField(dst []byte, i int64, f int) ([]byte, bool, error) {
	if f == 1 && i%2 == 1 {
		return dst, false, nil
	}
	return strconv.AppendInt(append(dst, 'x'), i, 10), true, nil
}

func (withFields) AppendLabels(dst []int32, i int64) ([]int32, error) {
	return append(dst, int32(i%10), int32((i+3)%10)), nil
}

// TestBatchFields: each sample's fields and label set reach its batch,
// through a holdout part (which renumbers the samples), and reading them
// allocates nothing in the steady state.
func TestBatchFields(t *testing.T) {
	src, err := loader.Split(withFields{synthetic.New(5000, 0)}, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := loader.FieldNamesOf(src); strings.Join(got, ",") != "a,b" || !loader.MultiLabelOf(src) {
		t.Fatalf("through a split: fields %q, multi-label %v", got, loader.MultiLabelOf(src))
	}
	pool := loader.NewPool(2)
	defer pool.Close()
	l := newTestLoader(t, pool, src, func(c *loader.Config) { c.BatchSize, c.Epochs = 64, 0 })
	ctx := context.Background()
	fs, _ := loader.As[loader.FieldSource](src)
	check := true
	step := func() {
		b, err := l.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := 0; check && k < b.Len(); k++ {
			i := b.Indices[k]
			a, _, _ := fs.AppendField(nil, i, 0)
			set, _ := fs.AppendLabels(nil, i)
			if string(b.Field(0, k)) != string(a) || !b.Present(0, k) || b.Present(1, k) != (b.Field(1, k) != nil) ||
				len(b.LabelSet(k)) != 2 || b.LabelSet(k)[0] != set[0] || b.LabelSet(k)[1] != set[1] {
				t.Fatalf("sample %d: fields %q %q (%v), set %v; want %q, set %v", i, b.Field(0, k), b.Field(1, k), b.Present(1, k), b.LabelSet(k), a, set)
			}
		}
		b.Release()
	}
	for range 20 {
		step()
	}
	check = false
	if n := testing.AllocsPerRun(100, step); n != 0 {
		t.Fatalf("%v allocations per batch, want 0", n)
	}
}

// TestMultiLabelRefusesMixing: mixup mixes one class per sample; a
// multi-label source is refused rather than mixed wrongly.
func TestMultiLabelRefusesMixing(t *testing.T) {
	src := withFields{synthetic.New(100, 0)}
	pipe, err := augment.NewPipeline(src.Spec(), append(augment.CIFARTrain(sample.F32, sample.CHW), augment.MixUp{Alpha: 0.4})...)
	if err != nil {
		t.Fatal(err)
	}
	pool := loader.NewPool(1)
	defer pool.Close()
	_, err = loader.New(pool, loader.Config{Source: src, Pipeline: pipe, World: 1, BatchSize: 8, Epochs: 1})
	if err == nil || !strings.Contains(err.Error(), "multi-label") {
		t.Fatalf("multi-label with mixup: %v", err)
	}
}

// bigFields gives every sample a field of 1.1 MiB: 64 of them are over
// MaxBatchFieldBytes.
type bigFields struct{ withFields }

func (bigFields) FieldNames() []string { return []string{"a"} }
func (bigFields) AppendField(dst []byte, i int64, f int) ([]byte, bool, error) {
	return append(dst, make([]byte, 11<<20/10)...), true, nil
}

func TestBatchFieldsBound(t *testing.T) {
	pool := loader.NewPool(2)
	defer pool.Close()
	for _, c := range []struct {
		batch int
		fail  bool
	}{{32, false}, {64, true}} {
		l := newTestLoader(t, pool, bigFields{withFields{synthetic.New(200, 0)}}, func(cfg *loader.Config) { cfg.BatchSize, cfg.Epochs = c.batch, 1 })
		b, err := l.Next(context.Background())
		if c.fail != (err != nil) || c.fail && !errors.Is(err, loader.ErrFieldTooLarge) {
			t.Errorf("batch of %d: %v", c.batch, err)
		}
		if b != nil {
			b.Release()
		}
		l.Close()
	}
}
