package nn

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"math"
)

// Checkpoint format (little-endian):
//
//	magic   "LDNNCKP1"
//	count   u32
//	count × { nameLen u16, name, ndim u8, dims u32×ndim, data f32×∏dims }
//	crc     u32  IEEE CRC-32 of every byte before it
const ckpMagic = "LDNNCKP1"

// Array is one named host tensor of a checkpoint.
type Array struct {
	Name  string
	Shape []int
	Data  []float32
}

const maxElems = 1 << 31

// WriteArrays writes arrays in the checkpoint format.
func WriteArrays(w io.Writer, arrs []Array) error {
	h := crc32.NewIEEE()
	bw := bufio.NewWriter(io.MultiWriter(w, h))
	var scratch [8]byte
	put := func(v uint64, n int) {
		binary.LittleEndian.PutUint64(scratch[:], v)
		bw.Write(scratch[:n])
	}
	bw.WriteString(ckpMagic)
	put(uint64(len(arrs)), 4)
	for _, a := range arrs {
		n := 1
		for _, d := range a.Shape {
			n *= d
		}
		if len(a.Name) > math.MaxUint16 || len(a.Shape) > math.MaxUint8 || n != len(a.Data) {
			return fmt.Errorf("nn: checkpoint: array %q shape %v holds %d values: %w", a.Name, a.Shape, len(a.Data), ErrCheckpoint)
		}
		put(uint64(len(a.Name)), 2)
		bw.WriteString(a.Name)
		put(uint64(len(a.Shape)), 1)
		for _, d := range a.Shape {
			put(uint64(d), 4)
		}
		for _, v := range a.Data {
			put(uint64(math.Float32bits(v)), 4)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("nn: checkpoint: %w", err)
	}
	binary.LittleEndian.PutUint32(scratch[:], h.Sum32())
	if _, err := w.Write(scratch[:4]); err != nil {
		return fmt.Errorf("nn: checkpoint: %w", err)
	}
	return nil
}

// ReadArrays reads arrays written by WriteArrays and verifies the CRC.
func ReadArrays(r io.Reader) ([]Array, error) {
	h := crc32.NewIEEE()
	br := io.TeeReader(bufio.NewReader(r), h)
	var b [8]byte
	get := func(n int) (uint64, error) {
		clear(b[:])
		if _, err := io.ReadFull(br, b[:n]); err != nil {
			return 0, err
		}
		return binary.LittleEndian.Uint64(b[:]), nil
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("nn: checkpoint: %s: %w", fmt.Sprintf(format, a...), ErrCheckpoint)
	}
	var magic [8]byte
	if _, err := io.ReadFull(br, magic[:]); err != nil || string(magic[:]) != ckpMagic {
		return nil, bad("missing magic")
	}
	count, err := get(4)
	if err != nil {
		return nil, bad("truncated header")
	}
	var arrs []Array
	for i := uint64(0); i < count; i++ {
		var a Array
		nl, err := get(2)
		name := make([]byte, nl)
		if err == nil {
			_, err = io.ReadFull(br, name)
		}
		nd, err2 := get(1)
		if err != nil || err2 != nil {
			return nil, bad("truncated array %d", i)
		}
		a.Name = string(name)
		n := uint64(1)
		for j := uint64(0); j < nd; j++ {
			d, err := get(4)
			if err != nil {
				return nil, bad("truncated shape of %q", a.Name)
			}
			a.Shape = append(a.Shape, int(d))
			if n *= d; n > maxElems {
				return nil, bad("array %q too large", a.Name)
			}
		}
		// Read in chunks so a corrupt count cannot demand a huge allocation.
		raw := make([]byte, 4*min(n, 1<<14))
		for left := n; left > 0; {
			k := min(left, uint64(len(raw)/4))
			if _, err := io.ReadFull(br, raw[:4*k]); err != nil {
				return nil, bad("truncated data of %q", a.Name)
			}
			for j := uint64(0); j < k; j++ {
				a.Data = append(a.Data, math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])))
			}
			left -= k
		}
		arrs = append(arrs, a)
	}
	sum := h.Sum32()
	if _, err := io.ReadFull(br, b[:4]); err != nil || binary.LittleEndian.Uint32(b[:4]) != sum {
		return nil, bad("CRC mismatch")
	}
	return arrs, nil
}

// Save writes the model's parameters and running statistics.
func (m *Model) Save(w io.Writer) error {
	arrs, err := m.arrays()
	if err != nil {
		return err
	}
	return WriteArrays(w, arrs)
}

func (m *Model) arrays() ([]Array, error) {
	var arrs []Array
	for _, p := range append(append([]*Param{}, m.params...), m.state...) {
		v := make([]float32, p.Len())
		if err := m.ctx.Dev.CopyOut(v, p.W); err != nil {
			return nil, fmt.Errorf("nn: save %s: %w", p.Name, err)
		}
		arrs = append(arrs, Array{Name: p.Name, Shape: p.Shape, Data: v})
	}
	return arrs, nil
}

// Load reads a checkpoint written by Save into the model. Names and shapes
// must match exactly; nothing is changed if they do not.
func (m *Model) Load(r io.Reader) error {
	arrs, err := ReadArrays(r)
	if err != nil {
		return err
	}
	all := append(append([]*Param{}, m.params...), m.state...)
	if len(arrs) != len(all) {
		return fmt.Errorf("nn: checkpoint has %d arrays, model %d: %w", len(arrs), len(all), ErrCheckpoint)
	}
	byName := make(map[string]Array, len(arrs))
	for _, a := range arrs {
		byName[a.Name] = a
	}
	for _, p := range all {
		a, ok := byName[p.Name]
		if !ok || fmt.Sprint(a.Shape) != fmt.Sprint(p.Shape) {
			return fmt.Errorf("nn: checkpoint lacks %s%v: %w", p.Name, p.Shape, ErrCheckpoint)
		}
	}
	for _, p := range all {
		if err := m.ctx.Dev.CopyIn(p.W, byName[p.Name].Data); err != nil {
			return fmt.Errorf("nn: load %s: %w", p.Name, err)
		}
	}
	return m.ctx.Dev.Sync()
}
