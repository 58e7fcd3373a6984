package trainer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/loaderd/loaderd/sampler"
)

// ErrCheckpoint reports an unreadable checkpoint or one made by a run
// with a different configuration.
var ErrCheckpoint = errors.New("trainer: checkpoint")

// Checkpoint file format (little-endian):
//
//	magic  "LDTRAIN1"
//	u32    length, then CheckpointMeta as JSON
//	u64    length, then the model (nn.Model.Save)
//	u64    length, then the optimizer state (optim.SGD.Save)
//	u32    IEEE CRC-32 of every byte before it
const checkpointMagic = "LDTRAIN1"

// Fingerprint is the part of a TrainConfig that a resumed run must share
// with the run that wrote the checkpoint: what decides which batches come
// and the optimisation's hyper-parameters. The number of DataParallel
// devices may change (without SyncBN it changes only the slices BatchNorm
// normalises over), and so may a DDP run's world: an elastic resume
// (docs/RESUME.md) finishes the checkpoint's epoch over the new world
// from the global position, with no sample lost or repeated. World is
// kept because it says what Position means.
type Fingerprint struct {
	Dataset        string  `json:"dataset"`
	Model          string  `json:"model"`
	CNN            string  `json:"cnn,omitempty"`
	Mode           string  `json:"mode"`
	World          int     `json:"world" resume:"elastic"` // ranks the sampler splits an epoch into
	Batch          int     `json:"batch"`
	Epochs         int     `json:"epochs"`
	Seed           uint64  `json:"seed"`
	Augment        string  `json:"augment"`
	LR             float64 `json:"lr"`
	Schedule       string  `json:"schedule"`
	Warmup         float64 `json:"warmup"`
	Momentum       float64 `json:"momentum"`
	Nesterov       bool    `json:"nesterov"`
	WeightDecay    float64 `json:"weight_decay"`
	LabelSmoothing float64 `json:"label_smoothing"`
	SyncBN         bool    `json:"sync_bn"`
	AMP            string  `json:"amp,omitempty"` // "" for f32: older checkpoints match
}

func (c *TrainConfig) fingerprint() Fingerprint {
	var cnn string
	if c.Model == "cnn" {
		cnn = fmt.Sprintf("widths %v blocks %v classes %d", c.CNN.Widths, c.CNN.Blocks, c.CNN.Classes)
	}
	return Fingerprint{Dataset: c.Dataset, Model: c.Model, CNN: cnn, Mode: c.Mode, World: c.world(), Batch: c.Batch,
		Epochs: c.Epochs, Seed: c.Seed, Augment: c.Augment, LR: c.LR, Schedule: c.Schedule, Warmup: c.Warmup,
		Momentum: c.Momentum, Nesterov: c.Nesterov, WeightDecay: c.WeightDecay,
		LabelSmoothing: c.LabelSmoothing, SyncBN: c.SyncBN, AMP: c.ampName()}
}

// diff lists the fields where f and g differ.
func (f Fingerprint) diff(g Fingerprint) []string {
	var out []string
	a, b, t := reflect.ValueOf(f), reflect.ValueOf(g), reflect.TypeOf(f)
	for i := range t.NumField() {
		if t.Field(i).Tag.Get("resume") == "elastic" {
			continue
		}
		if x, y := a.Field(i).Interface(), b.Field(i).Interface(); x != y {
			out = append(out, fmt.Sprintf("%s: checkpoint %v, now %v", t.Field(i).Tag.Get("json"), x, y))
		}
	}
	return out
}

// meter accumulates an epoch's training statistics.
type meter struct {
	LossSum float64 `json:"loss_sum"` // Σ loss·n
	Correct int64   `json:"correct"`
	N       int64   `json:"n"`
	Steps   int64   `json:"steps"`
	Seconds float64 `json:"seconds"` // step time
	Wait    float64 `json:"wait"`    // of which waiting for data
}

func (m meter) loss() float64     { return m.LossSum / float64(max(1, m.N)) }
func (m meter) accuracy() float64 { return float64(m.Correct) / float64(max(1, m.N)) }

// CheckpointMeta is the JSON part of a checkpoint.
type CheckpointMeta struct {
	Version     int              `json:"version"`
	Fingerprint Fingerprint      `json:"config"`
	Position    sampler.Position `json:"position"` // next batch to train on, in Fingerprint.World's split
	// Global is Position in a form any world resumes from (sampler's
	// Distributed.Global): the epoch and how many entries of its order
	// were consumed. Absent from checkpoints older than elastic resume,
	// which derive it from Position.
	Global  *sampler.Position `json:"global,omitempty"`
	Steps   int64             `json:"steps"`
	Epoch   meter             `json:"epoch_so_far"` // the unfinished epoch's statistics
	Epochs  []EpochResult     `json:"epochs"`
	Pending *EpochResult      `json:"pending,omitempty"` // trained, its evaluation interrupted
	Scaler  *ScalerState      `json:"scaler,omitempty"`  // fp16's loss scaler
	Saved   time.Time         `json:"saved"`
}

// ScalerState is an amp.GradScaler's state, as torch's GradScaler.state_dict
// keeps it: the scale and the clean steps towards its next growth.
type ScalerState struct {
	Scale   float32 `json:"scale"`
	Tracker int     `json:"growth_tracker"`
}

// Checkpoint is a decoded checkpoint file.
type Checkpoint struct {
	Meta      CheckpointMeta
	Model     []byte // nn.Model.Load reads it
	Optimizer []byte // optim.SGD.Load reads it
}

// Encode writes the checkpoint format.
func (c *Checkpoint) Encode(w io.Writer) error {
	meta, err := json.Marshal(c.Meta)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCheckpoint, err)
	}
	var buf bytes.Buffer
	buf.WriteString(checkpointMagic)
	buf.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(meta))))
	buf.Write(meta)
	for _, part := range [][]byte{c.Model, c.Optimizer} {
		buf.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(part))))
		buf.Write(part)
	}
	buf.Write(binary.LittleEndian.AppendUint32(nil, crc32.ChecksumIEEE(buf.Bytes())))
	_, err = w.Write(buf.Bytes())
	return err
}

// DecodeCheckpoint parses the checkpoint format and verifies its CRC.
func DecodeCheckpoint(data []byte) (*Checkpoint, error) {
	bad := func(what string) error { return fmt.Errorf("%w: %s", ErrCheckpoint, what) }
	if len(data) < len(checkpointMagic)+4+4 || string(data[:len(checkpointMagic)]) != checkpointMagic {
		return nil, bad("not a trainer checkpoint (bad magic)")
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.ChecksumIEEE(body) != sum {
		return nil, bad("CRC mismatch (truncated or corrupt file)")
	}
	rest := body[len(checkpointMagic):]
	take := func(width int) ([]byte, error) {
		if len(rest) < width {
			return nil, bad("truncated")
		}
		var n uint64
		if width == 4 {
			n = uint64(binary.LittleEndian.Uint32(rest))
		} else {
			n = binary.LittleEndian.Uint64(rest)
		}
		rest = rest[width:]
		if n > uint64(len(rest)) {
			return nil, bad("truncated")
		}
		part := rest[:n]
		rest = rest[n:]
		return part, nil
	}
	var c Checkpoint
	meta, err := take(4)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(meta, &c.Meta); err != nil {
		return nil, fmt.Errorf("%w: metadata: %w", ErrCheckpoint, err)
	}
	if c.Meta.Version != 1 {
		return nil, bad(fmt.Sprintf("version %d, want 1", c.Meta.Version))
	}
	if c.Model, err = take(8); err != nil {
		return nil, err
	}
	if c.Optimizer, err = take(8); err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, bad("trailing bytes")
	}
	return &c, nil
}

// ReadCheckpoint reads a checkpoint file; a missing file is an error that
// matches os.ErrNotExist.
func ReadCheckpoint(path string) (*Checkpoint, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: checkpoint: %w", err)
	}
	c, err := DecodeCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// WriteFile writes the checkpoint atomically: into a temporary file in the
// same directory, synced, then renamed over path, so a crash leaves either
// the old checkpoint or the new one, never a torn file. Where the system
// allows (Linux's O_TMPFILE), the data goes to an unnamed file that gets
// its temporary name only once complete, so a writer killed mid-write
// leaves nothing behind; elsewhere it goes to PATH.tmpNNN, and what a
// crash leaves there is removed by the next WriteFile, or by Train when it
// resumes. One writer per checkpoint path, as for the checkpoint itself.
func (c *Checkpoint) WriteFile(path string) error {
	var buf bytes.Buffer
	if err := c.Encode(&buf); err != nil {
		return err
	}
	removeStaleTemps(path)
	if err := writeAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("trainer: checkpoint %s: %w", path, err)
	}
	return nil
}

// useUnnamed is false in a test of writeNamed, the fallback of
// writeUnnamed (Linux's O_TMPFILE).
var useUnnamed = true

// tempPrefix starts the name of path's temporary files: PATH.tmpNNN.
func tempPrefix(path string) string { return filepath.Base(path) + ".tmp" }

// writeAtomic writes data to a complete, synced temporary file beside
// path, renames it over path, and syncs the directory.
func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	tmp, ok, err := writeUnnamed(dir, tempPrefix(path), data)
	if !ok {
		tmp, err = writeNamed(dir, tempPrefix(path), data)
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil { // make the rename durable
		d.Sync()
		d.Close()
	}
	return nil
}

// writeNamed writes data to a new file dir/PREFIXNNN, synced, and returns
// its name. A crash before it returns leaves a torn file there, which
// removeStaleTemps finds by its name.
func writeNamed(dir, prefix string, data []byte) (name string, err error) {
	f, err := os.CreateTemp(dir, prefix+"*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	if err = f.Sync(); err != nil {
		return "", err
	}
	return f.Name(), f.Close()
}

// removeStaleTemps removes path's temporary files (PATH.tmp followed by
// digits, regular files) that a writer killed mid-write left behind, and
// returns their names. With one writer per path, any such file is stale.
func removeStaleTemps(path string) []string {
	dir, prefix := filepath.Dir(path), tempPrefix(path)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" || strings.Trim(rest, "0123456789") != "" || !e.Type().IsRegular() {
			continue
		}
		if name := filepath.Join(dir, e.Name()); os.Remove(name) == nil {
			removed = append(removed, name)
		}
	}
	return removed
}
