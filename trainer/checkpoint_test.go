package trainer

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loaderd/loaderd/sampler"
)

func TestCheckpointRoundTrip(t *testing.T) {
	c := validConfig()
	ck := &Checkpoint{Model: []byte("model bytes"), Optimizer: []byte{1, 2, 3},
		Meta: CheckpointMeta{Version: 1, Fingerprint: c.fingerprint(), Position: sampler.Position{Epoch: 2, Batch: 7},
			Steps: 57, Epoch: meter{LossSum: 3.5, N: 10}, Epochs: []EpochResult{{Epoch: 0, Loss: 1.5, Eval: &EvalResult{Accuracy: 0.5}}}}}
	path := filepath.Join(t.TempDir(), "run.ckpt")
	if err := ck.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if err := ck.WriteFile(path); err != nil { // overwrite in place
		t.Fatal(err)
	}
	got, err := ReadCheckpoint(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Model, ck.Model) || !bytes.Equal(got.Optimizer, ck.Optimizer) || got.Meta.Position != ck.Meta.Position ||
		got.Meta.Steps != 57 || got.Meta.Epoch != ck.Meta.Epoch || got.Meta.Epochs[0].Eval.Accuracy != 0.5 ||
		len(got.Meta.Fingerprint.diff(c.fingerprint())) != 0 {
		t.Errorf("read back %+v", got)
	}
	if left, _ := filepath.Glob(path + ".tmp*"); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if _, err := ReadCheckpoint(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestCheckpointCorrupt(t *testing.T) {
	var buf bytes.Buffer
	ck := &Checkpoint{Model: []byte("m"), Optimizer: []byte("o"), Meta: CheckpointMeta{Version: 1}}
	if err := ck.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()
	flip := append([]byte(nil), good...)
	flip[20] ^= 1
	cases := map[string][]byte{
		"empty":       nil,
		"magic":       append([]byte("XXXXXXXX"), good[8:]...),
		"bit flip":    flip,
		"truncated":   good[:len(good)-9],
		"not a file":  []byte("LDTRAIN1\x00\x00"),
		"only header": good[:12],
	}
	for name, data := range cases {
		if _, err := DecodeCheckpoint(data); !errors.Is(err, ErrCheckpoint) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := DecodeCheckpoint(good); err != nil {
		t.Errorf("intact: %v", err)
	}
}

func TestFingerprintDiff(t *testing.T) {
	a := validConfig()
	b := a
	b.Batch, b.Mode, b.Devices, b.LR = 256, "ddp", 4, 0.1
	d := strings.Join(a.fingerprint().diff(b.fingerprint()), "; ")
	for _, w := range []string{"batch: checkpoint 128, now 256", "mode: checkpoint dp, now ddp", "lr: checkpoint 0.4, now 0.1"} {
		if !strings.Contains(d, w) {
			t.Errorf("diff %q lacks %q", d, w)
		}
	}
	// A ddp world may change: an elastic resume (docs/RESUME.md).
	if strings.Contains(d, "world") {
		t.Errorf("diff %q names the world", d)
	}
	e, f := b, b
	f.Devices = 2
	if d := e.fingerprint().diff(f.fingerprint()); len(d) != 0 || e.fingerprint().World == f.fingerprint().World {
		t.Errorf("ddp world 4 then 2: diff %v", d)
	}
	c := a
	c.Devices, c.Prefetch = 8, 2 // dp: devices do not change which batches come
	if d := a.fingerprint().diff(c.fingerprint()); len(d) != 0 {
		t.Errorf("dp device count should not matter: %v", d)
	}
}

// TestCheckpointTornTemp: a writer killed mid-write leaves a torn
// PATH.tmpNNN (only where O_TMPFILE is missing: it is simulated here);
// the next WriteFile removes it, leaving other files alone, and the
// checkpoint reads back whole. The write path itself leaves no temporary
// file, with O_TMPFILE and without.
func TestCheckpointTornTemp(t *testing.T) {
	for _, unnamed := range []bool{true, false} {
		useUnnamed = unnamed
		t.Cleanup(func() { useUnnamed = true })
		dir := t.TempDir()
		path := filepath.Join(dir, "run.ckpt")
		ck := &Checkpoint{Model: []byte("model"), Optimizer: []byte("opt"), Meta: CheckpointMeta{Version: 1, Steps: 1}}
		if err := ck.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		ck.Encode(&buf)
		torn := path + ".tmp123456"
		keep := []string{path + ".tmpl", path + ".tmp12x", filepath.Join(dir, "other.ckpt.tmp99")}
		for _, name := range append(keep, torn) {
			if err := os.WriteFile(name, buf.Bytes()[:buf.Len()/2], 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ck.Meta.Steps = 2
		if err := ck.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(torn); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("O_TMPFILE %v: the torn temporary file is still there (%v)", unnamed, err)
		}
		for _, name := range keep {
			if _, err := os.Stat(name); err != nil {
				t.Fatalf("%s, not a temporary file of %s, was removed", name, path)
			}
		}
		if left, _ := filepath.Glob(path + ".tmp[0-9]*"); len(left) != 1 { // tmp12x
			t.Fatalf("O_TMPFILE %v: left %v", unnamed, left)
		}
		got, err := ReadCheckpoint(path)
		if err != nil || got.Meta.Steps != 2 {
			t.Fatalf("O_TMPFILE %v: read back %+v, %v", unnamed, got, err)
		}
	}
}
