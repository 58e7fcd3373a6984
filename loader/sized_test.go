package loader

import (
	"strings"
	"testing"

	"github.com/loaderd/loaderd/augment"
	"github.com/loaderd/loaderd/client/sample"
)

// varSource says its images vary in size but cannot say each one's.
type varSource struct{}

func (varSource) Len() int64 { return 10 }
func (varSource) Spec() augment.Spec {
	return augment.Spec{C: 3, DType: sample.U8, Layout: sample.HWC}
}
func (varSource) Classes() []string { return []string{"a"} }
func (varSource) Sample(int64, []byte) (int32, []byte, error) {
	return 0, nil, nil
}
func (varSource) String() string { return "var:" }
func (varSource) Close() error   { return nil }

// TestNewVariableSizeNeedsSizedSource: a source of varying sizes must be
// a SizedSource, whatever the pipeline.
func TestNewVariableSizeNeedsSizedSource(t *testing.T) {
	pipe, err := augment.NewPipeline(varSource{}.Spec(), augment.CenterCrop{Size: 8})
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(1)
	defer pool.Close()
	_, err = New(pool, Config{Source: varSource{}, Pipeline: pipe, BatchSize: 2, World: 1})
	if err == nil || !strings.Contains(err.Error(), "SizedSource") {
		t.Fatalf("New: %v, want a SizedSource error", err)
	}
}
